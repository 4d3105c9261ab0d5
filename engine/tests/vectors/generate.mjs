// Generates revision test vectors with JavaScript itself: node generate.mjs > revision.json
//
// For each content array (given as JSON text, parsed by JSON.parse exactly as CodeNomad reads a
// stored message), prints the revision (SHA-256 hex of JSON.stringify of the value with object
// keys sorted by UTF-16 code units, arrays in order) and each part's `bytes` (UTF-8 length of
// JSON.stringify(part) in stored key order).
import { createHash } from "node:crypto";

const texts = {
  empty: `[]`,
  key_order: `[{"type":"tool","b":1,"a":2,"id":"x"},{"id":"y","type":"reasoning","text":"t"}]`,
  non_ascii: `[{"text":"naïve café — 日本語 Ωmega ≈ √2","zé":1,"ze":2,"z":3}]`,
  astral_vs_bmp_keys: `[{"\uff61":1,"😀":2,"\ue000":3,"a":4,"𝔸":5,"Z":6}]`,
  astral_values: `[{"type":"text","text":"🚀🔥✨👩‍💻 🇺🇳 𝔸𝔹"}]`,
  control_characters: `[{"text":"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\\u007f \\"q\\" \\\\ / \\u2028\\u2029"}]`,
  escaped_input: `[{"t\\u0065xt":"\\u00e9\\u65e5\\ud83d\\ude80\\/"}]`,
  numbers: `[{"n":[1.0,1e21,1e-7,-0,0.1,0.30000000000000004,9007199254740993,123456789012345678901234567890,-1.5e300,5e-324,1.7976931348623157e308,100,1e2,2.5E+3]}]`,
  nested_arrays: `[[[1,[2,[3]]],{"b":[{"d":1,"c":2}],"a":[]}],null,true,false,"s",0]`,
  tool_part: `[{"type":"tool","id":"call_1","name":"bash","provider":{"executed":false},"state":{"status":"completed","input":{"command":"seq 1 3","description":"d"},"content":[{"type":"text","text":"1\\n2\\n3\\n"}],"structured":{"exit":0,"truncated":false}},"time":{"created":1795941019003,"ran":1795941019100,"completed":1795941019200}},{"type":"reasoning","id":"reasoning-0","text":"Thinking: REASONING_CANARY","time":{"created":1,"completed":2}},{"type":"text","id":"text-0","text":"Retain this conclusion."}]`,
  duplicate_looking_keys: `[{"a":1,"A":2,"aa":3,"a ":4,"":5}]`,
  duplicate_keys: `[{"b":1,"a":2,"b":3}]`,
  integer_like_keys: `[{"b":1,"10":2,"9":3,"a":4,"01":5,"-1":6,"4294967294":7,"4294967295":8,"1.5":9,"0":10}]`,
};

function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    const out = {};
    for (const key of Object.keys(value).sort()) out[key] = canonical(value[key]);
    return out;
  }
  return value;
}

const vectors = Object.entries(texts).map(([name, text]) => {
  const content = JSON.parse(text);
  const revision = createHash("sha256").update(JSON.stringify(canonical(content))).digest("hex");
  const bytes = content.map((part) => Buffer.byteLength(JSON.stringify(part), "utf8"));
  return { name, text, revision, bytes };
});
process.stdout.write(JSON.stringify({ generator: `node ${process.version}`, vectors }, null, 2) + "\n");
