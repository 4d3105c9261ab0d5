//! The planner: decides whether a message may be pruned and which of its parts go.
//!
//! Source: CodeNomad `planner.ts` and DESIGN.md "Planner". A message may be pruned only if it is
//! an assistant message, it is complete (`time.completed` a finite number > 0), every part's type
//! is known, and no tool part is pending or running. Tool and reasoning parts are prunable; text
//! and every other known type are kept. The planner is pure: a store reads the rows, classifies
//! each part and hands the planner a [`StoredMessage`].

use serde_json::Value;

use crate::contract::{BlockedReason, PartKind, PreviewPart, PreviewResult, Selection};
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

/// A message as the store read it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Whether the message is an assistant message.
    pub is_assistant: bool,
    /// Whether `time.completed` is a finite number > 0.
    pub completed: bool,
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
    /// Sum of `bytes` of the removed parts.
    pub bytes: u64,
}

/// Whether `time.completed` in a message's JSON is a finite number > 0.
pub fn completed_at(message: &Value) -> bool {
    message
        .pointer("/time/completed")
        .and_then(Value::as_f64)
        .is_some_and(|t| t.is_finite() && t > 0.0)
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

    /// Checks the message-level rules. Errors: `not_deletable` for a non-assistant or incomplete
    /// message, an unknown part type, or a pending or running tool.
    pub fn check_prunable(&self) -> Result<(), BlockedReason> {
        if !self.is_assistant || !self.completed {
            return Err(BlockedReason::NotDeletable);
        }
        if self.parts.len() > crate::contract::MAX_PARTS {
            return Err(BlockedReason::NotDeletable);
        }
        for part in &self.parts {
            match part.class {
                PartClass::Unknown => return Err(BlockedReason::NotDeletable),
                PartClass::Tool(status) if !status.is_finished() => {
                    return Err(BlockedReason::NotDeletable)
                }
                _ => {}
            }
        }
        Ok(())
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

    /// The preview answer for this message.
    pub fn preview(&self, live_mutation: bool) -> PreviewResult {
        match self.check_prunable() {
            Err(reason) => PreviewResult::Blocked { reason },
            Ok(()) => {
                let measured = self.measure();
                PreviewResult::Preview {
                    parts: self.technical_parts(&measured),
                    revision: measured.revision,
                    live_mutation,
                }
            }
        }
    }

    /// Plans a prune of `selection` against the caller's `expected` revision.
    ///
    /// Errors: `not_deletable` (message rules, a text or out-of-range index, or nothing technical
    /// to remove), then `conflict` when the content's revision differs from `expected`.
    pub fn plan(&self, selection: &Selection, expected: &str) -> Result<Plan, BlockedReason> {
        self.check_prunable()?;
        let remove: Vec<usize> = match selection {
            Selection::Indexes(indexes) => {
                let mut remove = Vec::with_capacity(indexes.len());
                for &index in indexes {
                    let index = index as usize;
                    if self.kind(index).is_none() {
                        return Err(BlockedReason::NotDeletable);
                    }
                    remove.push(index);
                }
                remove
            }
            Selection::AllTechnical => (0..self.parts.len())
                .filter(|&i| self.kind(i).is_some())
                .collect(),
        };
        if remove.is_empty() {
            return Err(BlockedReason::NotDeletable);
        }
        let measured = self.measure();
        if measured.revision != expected {
            return Err(BlockedReason::Conflict);
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
        })
    }
}
