//! Power loss, rebuilt from a recording: a command runs once under strace, which records every
//! write (`pwrite64`), truncation, sync (`fsync`, `fdatasync`), unlink and rename of the files
//! in the fixture's folder. A power cut keeps what a file had at its last sync and, of the
//! writes since, any subset, in order (none: the writes were lost; all: the kill -9 case; some:
//! torn). At each sync point the files are rebuilt as a cut just before it would leave them,
//! once per kept subset, into a folder of their own, for the caller to open and check.
//!
//! The `-shm` file is never rebuilt: it is SQLite's index of the WAL, rebuilt from the WAL by
//! the first connection after a cut. Unlinks, links and renames take effect when they run (a
//! directory entry is not rolled back), as ext4's journal keeps them in order with the data of
//! a synced file.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One change to a file's bytes.
#[derive(Debug, Clone)]
enum Change {
    /// `pwrite64`: bytes at an offset.
    Write { offset: u64, bytes: Vec<u8> },
    /// `ftruncate`: the new length.
    Truncate(u64),
}

impl Change {
    fn apply(&self, content: &mut Vec<u8>) {
        match self {
            Change::Write { offset, bytes } => {
                let start = *offset as usize;
                let end = start + bytes.len();
                if content.len() < end {
                    content.resize(end, 0);
                }
                content[start..end].copy_from_slice(bytes);
            }
            Change::Truncate(len) => content.resize(*len as usize, 0),
        }
    }
}

/// One file as a power cut sees it: its bytes at its last sync and the changes since.
#[derive(Debug, Clone, Default)]
struct File {
    synced: Vec<u8>,
    unsynced: Vec<Change>,
}

/// One recorded step on the fixture's files, in the order the command ran them.
#[derive(Debug, Clone)]
enum Step {
    Change(String, Change),
    Sync(String),
    Unlink(String),
    Rename(String, String),
    /// `link`/`linkat`: a second name for the same file (made once it is written and closed,
    /// as the journal's creation does, so the two are copies from then on).
    Link(String, String),
}

/// A recorded run: the files it started from (by name in the folder) and its steps.
pub struct Recording {
    start: BTreeMap<String, Vec<u8>>,
    steps: Vec<Step>,
}

/// The files of `folder` a cut may leave (every regular file but the `-shm`), by name.
fn files_of(folder: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with("-shm") && !name.ends_with(".trace"))
        .map(|name| {
            let bytes = std::fs::read(folder.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

/// Runs the binary with `args` under strace on the files of `folder` (which holds `db`), and
/// returns the recording and the exit code.
pub fn record(strace: &str, folder: &Path, args: &[String]) -> (Recording, i32) {
    let start = files_of(folder);
    let trace = folder.join("run.trace");
    let status = Command::new(strace)
        .args(["-f", "-qq", "-xx", "-s", "1000000000", "-o"])
        .arg(&trace)
        .args([
            "-e",
            "trace=openat,close,pwrite64,write,ftruncate,fsync,fdatasync,unlink,unlinkat,rename,renameat,renameat2,link,linkat",
        ])
        .arg(crate::common::cli::BINARY)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    std::fs::remove_file(&trace).unwrap();
    let steps = parse(&text, folder);
    (Recording { start, steps }, status.code().unwrap_or(-1))
}

/// The calls of a trace, with strace's `<unfinished ...>` and `<... resumed>` halves joined.
fn calls(text: &str) -> Vec<String> {
    let mut open: HashMap<String, String> = HashMap::new();
    let mut done = Vec::new();
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            open.insert(pid.to_string(), head.to_string());
        } else if rest.starts_with("<... ") {
            let tail = rest.split_once("resumed>").map_or("", |(_, tail)| tail);
            let head = open.remove(pid).unwrap_or_default();
            done.push(format!("{head}{tail}"));
        } else {
            done.push(rest.to_string());
        }
    }
    done
}

/// Bytes of strace's `"\x41\x42"` (with `-xx`, every byte is escaped).
fn unescape(quoted: &str) -> Vec<u8> {
    let inner = quoted.trim().trim_start_matches('"').trim_end_matches('"');
    inner
        .split("\\x")
        .filter(|hex| !hex.is_empty())
        .map(|hex| u8::from_str_radix(&hex[..2], 16).unwrap())
        .collect()
}

/// The quoted strings of a call's arguments, in order.
fn strings(args: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = args;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let end = after.find('"').unwrap();
        found.push(after[..end].to_string());
        rest = &after[end + 1..];
    }
    found
}

/// The number an argument holds (`4095)      = 1` is 4095: what follows it is cut).
fn number(field: &str) -> u64 {
    field
        .trim()
        .split(')')
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The number a call returned (`= 4096`), `None` for an error (`= -1 ENOENT ...`).
fn returned(call: &str) -> Option<i64> {
    let (_, ret) = call.rsplit_once(" = ")?;
    let value: i64 = ret.split_whitespace().next()?.parse().ok()?;
    (value >= 0).then_some(value)
}

/// The steps on files in `folder` (by name), from strace's calls.
fn parse(text: &str, folder: &Path) -> Vec<Step> {
    let folder = std::fs::canonicalize(folder).unwrap();
    let name_in = |bytes: Vec<u8>| -> Option<String> {
        let path = PathBuf::from(String::from_utf8(bytes).ok()?);
        (path.parent()? == folder).then(|| path.file_name().unwrap().to_string_lossy().into_owned())
    };
    let mut fds: HashMap<i64, String> = HashMap::new();
    let mut steps = Vec::new();
    for call in calls(text) {
        let Some((name, args)) = call.split_once('(') else {
            continue;
        };
        let Some(ret) = returned(&call) else {
            continue;
        };
        let first_number = |args: &str| -> i64 {
            let digits: String = args
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse().unwrap()
        };
        match name {
            "openat" => {
                let path = unescape(&strings(args)[0]);
                if let Some(file) = name_in(path) {
                    fds.insert(ret, file);
                } else {
                    fds.remove(&ret);
                }
            }
            "close" => {
                fds.remove(&first_number(args));
            }
            "pwrite64" | "write" | "ftruncate" | "fsync" | "fdatasync" => {
                let Some(file) = fds.get(&first_number(args)).cloned() else {
                    continue;
                };
                if file.ends_with("-shm") {
                    continue;
                }
                match name {
                    "pwrite64" => {
                        let bytes = unescape(&strings(args)[0]);
                        let offset = number(args.rsplit(',').next().unwrap());
                        let bytes = bytes[..ret as usize].to_vec();
                        steps.push(Step::Change(file, Change::Write { offset, bytes }));
                    }
                    "write" => panic!("write(2) on {file}: only pwrite64 is modelled"),
                    "ftruncate" => {
                        let len = number(args.split(',').nth(1).unwrap());
                        steps.push(Step::Change(file, Change::Truncate(len)));
                    }
                    _ => steps.push(Step::Sync(file)),
                }
            }
            "unlink" | "unlinkat" => {
                if let Some(file) = strings(args).first().and_then(|s| name_in(unescape(s))) {
                    steps.push(Step::Unlink(file));
                }
            }
            "link" | "linkat" | "rename" | "renameat" | "renameat2" => {
                let names: Vec<Option<String>> = strings(args)
                    .iter()
                    .take(2)
                    .map(|quoted| name_in(unescape(quoted)))
                    .collect();
                if let [Some(from), Some(to)] = names.as_slice() {
                    let (from, to) = (from.clone(), to.clone());
                    steps.push(if name.contains("link") {
                        Step::Link(from, to)
                    } else {
                        Step::Rename(from, to)
                    });
                }
            }
            _ => {}
        }
    }
    steps
}

/// A small deterministic generator (xorshift), so that every run tries the same states.
struct Dice(u64);

impl Dice {
    fn roll(&mut self) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 & 1 == 1
    }
}

/// What a power cut keeps of the writes since each file's last sync.
#[derive(Debug, Clone, Copy)]
pub enum Kept {
    /// None of them.
    Nothing,
    /// All of them (what a kill -9 leaves).
    Everything,
    /// Each with even odds, decided by this seed.
    Torn(u64),
}

impl Recording {
    /// How many sync points the run had.
    pub fn sync_points(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Sync(_)))
            .count()
    }

    /// Builds, into `into` (the recorded folder, emptied of its files first), the files as a
    /// power cut just before sync point `point` (0-based; `sync_points()` for a cut after the
    /// last step) leaves them with `kept`.
    pub fn cut(&self, point: usize, kept: Kept, into: &Path) {
        let mut files: BTreeMap<String, File> = self
            .start
            .iter()
            .map(|(name, bytes)| {
                (
                    name.clone(),
                    File {
                        synced: bytes.clone(),
                        unsynced: Vec::new(),
                    },
                )
            })
            .collect();
        let mut syncs = 0;
        for step in &self.steps {
            match step {
                Step::Sync(name) => {
                    if syncs == point {
                        break;
                    }
                    syncs += 1;
                    let file = files.entry(name.clone()).or_default();
                    for change in std::mem::take(&mut file.unsynced) {
                        change.apply(&mut file.synced);
                    }
                }
                Step::Change(name, change) => {
                    files
                        .entry(name.clone())
                        .or_default()
                        .unsynced
                        .push(change.clone());
                }
                Step::Unlink(name) => {
                    files.remove(name);
                }
                Step::Rename(from, to) => {
                    if let Some(file) = files.remove(from) {
                        files.insert(to.clone(), file);
                    }
                }
                Step::Link(from, to) => {
                    if let Some(file) = files.get(from).cloned() {
                        files.insert(to.clone(), file);
                    }
                }
            }
        }
        // The folder holds the cut's files alone, at the paths the run used (the journal
        // records where its database was seen).
        std::fs::create_dir_all(into).unwrap();
        for entry in std::fs::read_dir(into).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
        for (index, (name, file)) in files.into_iter().enumerate() {
            let mut content = file.synced;
            let mut dice = match kept {
                Kept::Torn(seed) => Some(Dice(
                    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        ^ ((point as u64 + 1) << 8)
                        ^ (index as u64 + 1),
                )),
                _ => None,
            };
            for change in &file.unsynced {
                let keep = match (&kept, dice.as_mut()) {
                    (Kept::Nothing, _) => false,
                    (Kept::Everything, _) => true,
                    (Kept::Torn(_), Some(dice)) => dice.roll(),
                    (Kept::Torn(_), None) => unreachable!(),
                };
                if keep {
                    change.apply(&mut content);
                }
            }
            std::fs::write(into.join(name), content).unwrap();
        }
    }
}
