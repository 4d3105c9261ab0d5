//! The planner: decides whether a message may be pruned and which of its parts go.
//!
//! Source: CodeNomad `planner.ts` and docs/ARCHITECTURE.md, "Planner". A message may be pruned
//! only if it is
//! an assistant message, it is complete (`time.completed` a finite number > 0), every part's type
//! is known, and no tool part is pending or running. Tool and reasoning parts are prunable; text
//! and every other known type are kept. The planner is pure: a store reads the rows, classifies
//! each part and hands the planner a [`StoredMessage`].

use serde_json::Value;

use crate::contract::{BlockedReason, PartKind, PreviewPart, PreviewResult, Refusal, Selection};
use crate::revision;

/// Status of a tool part (`state.status` in both storage generations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// Waiting for input: OpenCode is still streaming the call.
    Pending,
    /// Executing.
    Running,
    /// Finished with output.
    Completed,
    /// Finished with an error.
    Error,
    /// Any other or missing status: treated like a running tool (fails closed).
    Unknown,
}

impl ToolStatus {
    /// Reads `state.status` of a tool part.
    pub fn of(part: &Value) -> Self {
        match part.pointer("/state/status").and_then(Value::as_str) {
            Some("pending") => Self::Pending,
            Some("running") => Self::Running,
            Some("completed") => Self::Completed,
            Some("error") => Self::Error,
            _ => Self::Unknown,
        }
    }

    /// Whether the tool has finished (`completed` or `error`).
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Completed | Self::Error)
    }
}

/// What the store found a part to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartClass {
    /// A tool part: prunable once finished.
    Tool(ToolStatus),
    /// A reasoning part: prunable.
    Reasoning,
    /// A known type that is never pruned (text, file, step-start, ...).
    Kept,
    /// A type this engine does not know: the whole message is `not_deletable`.
    Unknown,
}

/// One part of a message as the store read it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPart {
    /// The part as OpenCode reads it; the revision and `bytes` are computed over these values.
    pub value: Value,
    /// Its class.
    pub class: PartClass,
}

/// Why the message-level rules keep a message from being pruned ([`StoredMessage::prunability`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unprunable {
    /// Not an assistant message.
    NotAssistant,
    /// No `time.completed`: its run is active or was killed.
    Incomplete,
    /// More than 100,001 parts (`contract::MAX_PARTS`).
    TooManyParts(usize),
    /// A part of a type this version does not know.
    UnknownPart {
        /// Its position in the content.
        index: usize,
        /// Its `type` (`?` when it has none).
        kind: String,
    },
    /// A tool part still pending or running.
    UnfinishedTool {
        /// Its position in the content.
        index: usize,
        /// Its status.
        status: ToolStatus,
    },
}

impl std::fmt::Display for Unprunable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAssistant => {
                f.write_str("only assistant messages are pruned; this is not one")
            }
            Self::Incomplete => f.write_str(
                "the message is not complete (no time.completed): its run is active or was killed",
            ),
            Self::TooManyParts(n) => write!(f, "the message has {n} parts, over 100,001"),
            Self::UnknownPart { index, kind } => {
                write!(
                    f,
                    "part {index} has type `{kind}`, which this version does not know"
                )
            }
            Self::UnfinishedTool { index, status } => {
                write!(f, "tool part {index} is {status:?}, not finished")
            }
        }
    }
}

/// A message as the store read it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Whether the message is an assistant message.
    pub is_assistant: bool,
    /// Whether `time.completed` is a finite number > 0.
    pub completed: bool,
    /// `time.completed`, ms since the Unix epoch, when `completed`.
    pub completed_at_ms: Option<i64>,
    /// The message content in the order OpenCode reads it.
    pub parts: Vec<StoredPart>,
}

/// What a prune will do to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Indexes of the parts to remove, ascending.
    pub remove: Vec<usize>,
    /// Revision of the content before the prune.
    pub revision_before: String,
    /// Revision of the content after the prune.
    pub revision_after: String,
    /// Sum of `bytes` of the removed parts; for a prune of one of the copies OpenCode keeps,
    /// the bytes of row data it removes.
    pub bytes: u64,
    /// For a prune of one of the copies OpenCode keeps (diffs, superseded snapshots): what it
    /// removes, as its receipt will record it. `None` for a prune of parts.
    pub operation: Option<crate::receipt::Operation>,
}

/// Whether `time.completed` in a message's JSON is a finite number > 0.
pub fn completed_at(message: &Value) -> bool {
    completion_time(message).is_some()
}

/// `time.completed` of a message's JSON in ms since the Unix epoch, when it is a finite number
/// > 0 (fractions dropped).
pub fn completion_time(message: &Value) -> Option<i64> {
    message
        .pointer("/time/completed")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(|t| t.min(i64::MAX as f64) as i64)
}

impl StoredMessage {
    /// Revision of the whole content (64 lowercase hex).
    pub fn revision(&self) -> String {
        self.measure().revision
    }

    /// Revision of the whole content and `bytes` of each part, in one pass.
    pub fn measure(&self) -> revision::Measured {
        revision::measure(self.parts.iter().map(|p| &p.value))
    }

    fn kind(&self, index: usize) -> Option<PartKind> {
        match self.parts.get(index)?.class {
            PartClass::Tool(_) => Some(PartKind::Tool),
            PartClass::Reasoning => Some(PartKind::Reasoning),
            PartClass::Kept | PartClass::Unknown => None,
        }
    }

    /// Why the message-level rules keep this message from being pruned, or `Ok(())`: not an
    /// assistant message, not complete, more than 100,001 parts, a part of unknown type, a tool
    /// part pending or running (in that order). The one statement of these rules: a prune
    /// refuses with [`Self::check_prunable`], and a clean skips with its own names for them.
    pub fn prunability(&self) -> Result<(), Unprunable> {
        if !self.is_assistant {
            return Err(Unprunable::NotAssistant);
        }
        if !self.completed {
            return Err(Unprunable::Incomplete);
        }
        if self.parts.len() > crate::contract::MAX_PARTS {
            return Err(Unprunable::TooManyParts(self.parts.len()));
        }
        for (index, part) in self.parts.iter().enumerate() {
            match part.class {
                PartClass::Unknown => {
                    let kind = part
                        .value
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("?");
                    return Err(Unprunable::UnknownPart {
                        index,
                        kind: kind.to_string(),
                    });
                }
                PartClass::Tool(status) if !status.is_finished() => {
                    return Err(Unprunable::UnfinishedTool { index, status });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks the message-level rules ([`Self::prunability`]). Refusals (`not_deletable`, with
    /// what was found).
    pub fn check_prunable(&self) -> Result<(), Refusal> {
        self.prunability()
            .map_err(|why| Refusal::new(BlockedReason::NotDeletable, why.to_string()))
    }

    /// The technical parts, as the preview lists them, with `bytes` from `measured`.
    fn technical_parts(&self, measured: &revision::Measured) -> Vec<PreviewPart> {
        (0..self.parts.len())
            .filter_map(|i| {
                let kind = self.kind(i)?;
                Some(PreviewPart {
                    index: i as u32,
                    kind,
                    bytes: measured.bytes.get(i).copied().unwrap_or(0),
                })
            })
            .collect()
    }

    /// The preview answer for this message, with the refusal's explanation when blocked.
    pub fn preview(&self, live_mutation: bool) -> (PreviewResult, Option<Refusal>) {
        match self.check_prunable() {
            Err(refusal) => (
                PreviewResult::Blocked {
                    reason: refusal.reason,
                },
                Some(refusal),
            ),
            Ok(()) => {
                let measured = self.measure();
                let result = PreviewResult::Preview {
                    parts: self.technical_parts(&measured),
                    revision: measured.revision,
                    live_mutation,
                };
                (result, None)
            }
        }
    }

    /// Plans a prune of `selection` against the caller's `expected` revision.
    ///
    /// Refusals, in this order: the message rules (`not_deletable`); a revision other than the
    /// content's (`conflict`: indexes are positions in the previewed content, so they mean
    /// nothing against other content); a selected index that is out of range or not a tool or
    /// reasoning part, or no technical part at all (`not_deletable`).
    pub fn plan(&self, selection: &Selection, expected: &str) -> Result<Plan, Refusal> {
        self.check_prunable()?;
        self.plan_measured(self.measure(), selection, expected)
    }

    /// [`Self::plan`] of a message whose message-level rules already passed and that the caller
    /// already measured: `measured` must be [`Self::measure`] of this message (a clean measures
    /// each message once to choose its parts, then plans from the same measure). The same
    /// refusals as [`Self::plan`] after its message rules.
    pub fn plan_measured(
        &self,
        measured: revision::Measured,
        selection: &Selection,
        expected: &str,
    ) -> Result<Plan, Refusal> {
        if measured.revision != expected {
            return Err(Refusal::new(
                BlockedReason::Conflict,
                "the revision does not match the message's content: it changed since the \
                 preview, or the revision was mistyped; preview again and use the new revision",
            ));
        }
        let technical: Vec<usize> = (0..self.parts.len())
            .filter(|&i| self.kind(i).is_some())
            .collect();
        let remove: Vec<usize> = match selection {
            Selection::Indexes(indexes) => {
                let mut remove = Vec::with_capacity(indexes.len());
                for &index in indexes {
                    let index = index as usize;
                    if self.kind(index).is_none() {
                        let what = match self.parts.get(index) {
                            None => format!(
                                "index {index} is out of range (the message has {} parts)",
                                self.parts.len()
                            ),
                            Some(part) => format!(
                                "index {index} is a `{}` part, which is never pruned",
                                part.value
                                    .get("type")
                                    .and_then(Value::as_str)
                                    .unwrap_or("?")
                            ),
                        };
                        return Err(Refusal::new(
                            BlockedReason::NotDeletable,
                            format!(
                                "{what}; the tool and reasoning parts are {}",
                                list(&technical)
                            ),
                        ));
                    }
                    remove.push(index);
                }
                remove
            }
            Selection::AllTechnical => technical,
            // The store plans these itself: they remove no part.
            Selection::Diffs
            | Selection::SupersededSnapshots(_)
            | Selection::MigratedV1
            | Selection::ShellOutput => {
                return Err(Refusal::new(
                    BlockedReason::NotDeletable,
                    "this request selects no part of the message (summary diffs, snapshots of \
                     the event log, the rows OpenCode 2 migrated, or a shell row's output), \
                     which the planner of parts does not plan",
                ))
            }
        };
        if remove.is_empty() {
            return Err(Refusal::new(
                BlockedReason::NotDeletable,
                "the message has no tool or reasoning part left to prune",
            ));
        }
        let mut kept = Vec::with_capacity(self.parts.len() - remove.len());
        let mut bytes = 0;
        let mut next = remove.iter().peekable();
        for (i, part) in self.parts.iter().enumerate() {
            if next.peek() == Some(&&i) {
                next.next();
                bytes += measured.bytes.get(i).copied().unwrap_or(0);
            } else {
                kept.push(&part.value);
            }
        }
        Ok(Plan {
            remove,
            revision_before: measured.revision,
            revision_after: revision::revision(kept),
            bytes,
            operation: None,
        })
    }
}

/// `1, 2, 5` or `none`.
fn list(indexes: &[usize]) -> String {
    if indexes.is_empty() {
        return "none".into();
    }
    indexes
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
