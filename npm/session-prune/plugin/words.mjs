// Numbers as a person reads them in the plugin's answers: sizes in B, KiB, MiB and GiB (as the
// command line prints them), counts with their noun.

/** `n` bytes as `812 B`, `4.2 KiB`, `312.4 MiB`, `1.07 GiB`. */
export function bytes(n) {
  const value = Number(n) || 0;
  if (value < 1024) return `${value} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let scaled = value;
  let unit = -1;
  do {
    scaled /= 1024;
    unit += 1;
  } while (scaled >= 1024 && unit < units.length - 1);
  return `${scaled.toFixed(scaled < 10 ? 2 : 1)} ${units[unit]}`;
}

/** `n` with `noun`, plural when `n` is not 1: `1 message`, `3 messages`. */
export function count(n, noun) {
  return `${n} ${n === 1 ? noun : `${noun}s`}`;
}
