//! The client's batches (JSON arrays), answered as one array as JSON-RPC says they should be:
//! each request entry keeps a slot, filled by its answer as the connection sends it; once
//! every slot is filled the answers go out together in one line, where the last one would
//! have gone. Nothing else waits: notifications, other answers and our requests go out as
//! they come. An entry refused before the runtime sees it is answered in its slot at once;
//! a batch of notifications only has no answer.

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::connection::dialect::Inbound;
use crate::jsonrpc::{self, Id, Incoming, RpcError};

/// The batches whose answers are not all in yet, oldest first.
#[derive(Default)]
pub(super) struct Batches {
    open: Vec<Batch>,
}

/// One batch's answers so far.
#[derive(Default)]
pub(super) struct Batch {
    slots: Vec<Slot>,
}

/// One request entry's answer.
enum Slot {
    /// Not answered yet: its request's id.
    Waiting(Id),
    /// Its answer, one JSON text without the newline.
    Answered(Vec<u8>),
}

/// What a batch entry is, for its batch.
pub(super) enum Entry {
    /// A request: it gets an answer.
    Request(Id),
    /// A notification, or an answer to one of our requests: nothing to answer.
    Unanswered,
    /// Not a message the runtime can read: answered at once with this.
    Unreadable(Box<jsonrpc::Unreadable>),
}

impl Entry {
    /// What the batch entry `entry` (any JSON value) is, read as the runtime reads a message.
    pub(super) fn of(entry: &serde_json::Value) -> Entry {
        if !entry.is_object() {
            return Entry::Unreadable(Box::new(jsonrpc::Unreadable {
                id: Id::Null,
                error: RpcError::new(
                    jsonrpc::codes::INVALID_REQUEST,
                    "a batch entry that is not a JSON-RPC message object",
                ),
            }));
        }
        let text = serde_json::to_vec(entry).unwrap_or_default();
        match jsonrpc::parse(&text) {
            Ok(Incoming::Request { id, .. }) => Entry::Request(id),
            Ok(_) => Entry::Unanswered,
            Err(unreadable) => Entry::Unreadable(unreadable),
        }
    }
}

impl Batch {
    /// A slot waiting for the answer to request `id`.
    pub(super) fn waiting(&mut self, id: Id) {
        self.slots.push(Slot::Waiting(id));
    }

    /// Fills the last slot waiting for `id` (or a new one) with the error `error`.
    pub(super) fn refused(&mut self, id: &Id, error: &RpcError) {
        let answer = trimmed(jsonrpc::encode_error(id, error));
        let waiting = self
            .slots
            .iter_mut()
            .rev()
            .find(|slot| matches!(slot, Slot::Waiting(waiting) if waiting == id));
        match waiting {
            Some(slot) => *slot = Slot::Answered(answer),
            None => self.slots.push(Slot::Answered(answer)),
        }
    }

    fn complete(&self) -> bool {
        self.slots.iter().all(|slot| matches!(slot, Slot::Answered(_)))
    }

    /// The array of the answers, as one line.
    fn line(self) -> Vec<u8> {
        let mut line = vec![b'['];
        for (index, slot) in self.slots.into_iter().enumerate() {
            if let Slot::Answered(answer) = slot {
                if index > 0 {
                    line.push(b',');
                }
                line.extend_from_slice(&answer);
            }
        }
        line.extend_from_slice(b"]\n");
        line
    }

    /// Fills the first slot waiting for `id` with `answer`; `false` when none waits for it.
    fn take(&mut self, id: &Id, answer: &[u8]) -> bool {
        let slot = self
            .slots
            .iter_mut()
            .find(|slot| matches!(slot, Slot::Waiting(waiting) if waiting == id));
        match slot {
            Some(slot) => {
                *slot = Slot::Answered(trimmed(answer.to_vec()));
                true
            }
            None => false,
        }
    }
}

impl Batches {
    /// Whether some batch waits for answers.
    #[cfg(test)]
    fn waiting(&self) -> bool {
        !self.open.is_empty()
    }

    /// A batch read in full: its answer line when it is complete already (every entry
    /// refused), else `None` (it waits for its answers; one without slots has no answer).
    pub(super) fn opened(&mut self, batch: Batch) -> Option<Vec<u8>> {
        if batch.slots.is_empty() {
            return None;
        }
        if batch.complete() {
            return Some(batch.line());
        }
        self.open.push(batch);
        None
    }

    /// The lines about to be sent from `out[from..]`: the answers to batch entries taken into
    /// their batch, and a batch's array put in the place of its last answer.
    pub(super) fn collect(&mut self, out: &mut Vec<Vec<u8>>, from: usize) {
        if self.open.is_empty() || out.len() <= from {
            return;
        }
        let lines = out.split_off(from);
        for line in lines {
            match self.answer(&line) {
                Some(Some(array)) => out.push(array),
                Some(None) => {}
                None => out.push(line),
            }
        }
    }

    /// `line` as the answer to a batch entry: `None` when it is not one; `Some(array)` when it
    /// completed its batch.
    fn answer(&mut self, line: &[u8]) -> Option<Option<Vec<u8>>> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default, deserialize_with = "present")]
            id: Option<Id>,
            method: Option<IgnoredAny>,
        }
        let head: Head = serde_json::from_slice(line).ok()?;
        let id = head.id.filter(|_| head.method.is_none())?;
        let index = self.open.iter_mut().position(|batch| batch.take(&id, line))?;
        if !self.open[index].complete() {
            return Some(None);
        }
        Some(Some(self.open.remove(index).line()))
    }
}

/// An id that is present, `null` included (a request may have the id `null`).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Id>, D::Error> {
    Id::deserialize(deserializer).map(Some)
}

/// The batch `entries` (at least one) handed on: each through `translate` (a message of the
/// client's as the runtime reads it), into `out`; the requests' slots and the refused
/// entries' answers into the batch returned.
pub(super) fn read(
    entries: Vec<serde_json::Value>,
    out: &mut Vec<Inbound>,
    mut translate: impl FnMut(serde_json::Value, &mut Vec<Inbound>),
) -> Batch {
    let mut batch = Batch::default();
    for entry in entries {
        match Entry::of(&entry) {
            Entry::Unreadable(unreadable) => {
                batch.refused(&unreadable.id, &unreadable.error);
                continue;
            }
            Entry::Request(id) => batch.waiting(id),
            Entry::Unanswered => {}
        }
        let mut translated = Vec::with_capacity(1);
        translate(entry, &mut translated);
        for item in translated {
            match item {
                Inbound::Refused(refused) => batch.refused(&refused.id, &refused.error),
                item => out.push(item),
            }
        }
    }
    batch
}

/// A JSON text without its line's newline.
fn trimmed(mut text: Vec<u8>) -> Vec<u8> {
    while text.last().is_some_and(|byte| byte.is_ascii_whitespace()) {
        text.pop();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Vec<u8> {
        format!("{text}\n").into_bytes()
    }

    /// Answers are held until the batch's last, then go as one array in the entries' order;
    /// other lines pass at once; a refused entry's answer is in its slot.
    #[test]
    fn a_batch_is_answered_as_one_array_when_its_last_answer_comes() {
        let mut batches = Batches::default();
        let mut batch = Batch::default();
        batch.waiting(Id::Number(1));
        batch.waiting(Id::Number(2));
        batch.refused(&Id::Null, &RpcError::new(-32600, "not a message"));
        assert!(batches.opened(batch).is_none());
        let mut out = vec![
            line(r#"{"jsonrpc":"2.0","id":2,"result":{"b":1}}"#),
            line(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#),
            line(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#),
        ];
        batches.collect(&mut out, 0);
        assert_eq!(out.len(), 2, "the other lines pass");
        assert!(batches.waiting());
        let mut out = vec![line(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#)];
        batches.collect(&mut out, 0);
        let array: serde_json::Value = serde_json::from_slice(&out[0]).unwrap();
        assert_eq!(array[0]["id"], 1);
        assert_eq!(array[1]["result"]["b"], 1);
        assert_eq!(array[2]["error"]["code"], -32600);
        assert!(!batches.waiting());
    }

    #[test]
    fn a_batch_of_notifications_has_no_answer_and_one_all_refused_is_answered_at_once() {
        let mut batches = Batches::default();
        assert!(batches.opened(Batch::default()).is_none());
        let mut batch = Batch::default();
        batch.waiting(Id::Number(3));
        batch.refused(&Id::Number(3), &RpcError::new(-32601, "gone"));
        let array: serde_json::Value = serde_json::from_slice(&batches.opened(batch).unwrap()).unwrap();
        assert_eq!(array.as_array().unwrap().len(), 1);
        assert_eq!(array[0]["id"], 3);
        assert!(!batches.waiting());
    }
}
