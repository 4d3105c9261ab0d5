// Messages as the window route answers them, made one shape for drawing: a V1 message is
// `{info, parts}` as OpenCode's own API answers it, a V2 message the stored row with its `id`
// and `type` (its items in `content`). Tool and reasoning parts are what a prune removes;
// their index is their position in `parts` (V1) or `content` (V2), the contract's index.
// Also the small drawing helpers every view imports: `text` (an element with a class and
// text) and `bytes` (a size in words).

const EXCERPT = 600;

/** `{id, role, created, completed, parts: [{index, kind, title, text, technical, tool?}]}`. */
export function normalize(message) {
  if (message.info && Array.isArray(message.parts)) return normalizeV1(message);
  return normalizeV2(message);
}

function normalizeV1({ info, parts }) {
  return {
    id: info.id,
    role: info.role ?? "?",
    created: info.time?.created,
    completed: info.time?.completed,
    parts: parts.map((part, index) => {
      switch (part.type) {
        case "text":
          return piece(index, "text", "", part.text);
        case "reasoning":
          return piece(index, "reasoning", "reasoning", part.text, true);
        case "tool":
          return {
            ...piece(
              index,
              "tool",
              `${part.tool ?? "tool"} · ${part.state?.status ?? "?"}${part.state?.title ? ` · ${part.state.title}` : ""}`,
              part.state?.output ?? part.state?.error ?? "",
              true,
            ),
            tool: String(part.tool ?? ""),
          };
        case "file":
          return piece(index, "file", `file · ${part.filename ?? part.mime ?? ""}`, "");
        default:
          return piece(index, part.type ?? "?", part.type ?? "?", "");
      }
    }),
  };
}

function normalizeV2(row) {
  const content = Array.isArray(row.content) ? row.content : [];
  const parts = content.map((item, index) => {
    switch (item.type) {
      case "text":
        return piece(index, "text", "", item.text);
      case "reasoning":
        return piece(index, "reasoning", "reasoning", item.text, true);
      case "tool": {
        const output = (item.state?.content ?? [])
          .map((c) => (c.type === "text" ? c.text : `[${c.type}]`))
          .join("\n");
        return { ...piece(index, "tool", `${item.name ?? "tool"} · ${item.state?.status ?? "?"}`, output, true), tool: String(item.name ?? "") };
      }
      default:
        return piece(index, item.type ?? "?", item.type ?? "?", "");
    }
  });
  if (typeof row.text === "string") parts.unshift(piece(-1, "text", "", row.text));
  return {
    id: row.id,
    role: row.type ?? "?",
    created: row.time?.created,
    completed: row.time?.completed,
    parts,
  };
}

function piece(index, kind, title, text, technical = false) {
  const full = typeof text === "string" ? text : JSON.stringify(text ?? "");
  return {
    index,
    kind,
    title,
    text: full.length > EXCERPT ? `${full.slice(0, EXCERPT)}…` : full,
    length: full.length,
    technical,
  };
}

/** The element of one message: its header (role, time, the prune button) and its parts. */
export function render(message, onPreview) {
  const element = document.createElement("article");
  element.className = `message role-${message.role}`;
  element.dataset.messageId = message.id;
  const head = document.createElement("header");
  const when = message.created ? new Date(message.created).toLocaleString() : "";
  head.append(text("span", "role", message.role), text("span", "when", when), text("code", "id", message.id));
  const technical = message.parts.filter((p) => p.technical);
  if (message.role === "assistant" && technical.length > 0) {
    const button = text("button", "preview", `Preview prune · ${technical.length} part${technical.length === 1 ? "" : "s"}`);
    button.type = "button";
    button.addEventListener("click", () => onPreview(message.id, selected(element)));
    head.append(button);
  }
  element.append(head);
  for (const part of message.parts) {
    const block = document.createElement("section");
    block.className = `part kind-${part.kind}`;
    block.dataset.type = part.kind;
    block.dataset.index = String(part.index);
    if (part.technical) {
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.className = "select";
      box.value = String(part.index);
      label.append(box, text("span", "title", `#${part.index} ${part.title}`));
      block.append(label);
    } else if (part.title) {
      block.append(text("div", "title", part.title));
    }
    if (part.text) block.append(text("pre", "text", part.text));
    element.append(block);
  }
  return element;
}

/** The indexes checked in a message's element. */
function selected(element) {
  return [...element.querySelectorAll("input.select:checked")].map((box) => Number(box.value));
}

/** An element of `tag` with `className` and text `content`. */
export function text(tag, className, content) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  element.textContent = content ?? "";
  return element;
}

/** Bytes as a person reads them, in the units the CLI prints (KiB = 1,024 bytes). */
export function bytes(n) {
  if (!Number.isFinite(n)) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}
