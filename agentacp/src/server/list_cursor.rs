//! `session/list`'s cursor: where the previous page ended (a keyset: the last session's time
//! and id), as opaque text (hexadecimal JSON, versioned).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::server::session::ListPosition;

/// The cursor's content.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cursor {
    /// The format's version: 1.
    v: u32,
    /// The last session's time: seconds (negative before 1970) and nanoseconds.
    t: Option<(i64, u32)>,
    /// Its id.
    id: String,
}

/// The cursor of the page after `position`.
pub(super) fn write(position: &ListPosition) -> String {
    let t = position
        .updated_at
        .map(|time| match time.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(since) => (since.as_secs() as i64, since.subsec_nanos()),
            Err(before) => {
                let before = before.duration();
                let (secs, nanos) = (before.as_secs() as i64, before.subsec_nanos());
                if nanos == 0 {
                    (-secs, 0)
                } else {
                    (-secs - 1, 1_000_000_000 - nanos)
                }
            }
        });
    let json = serde_json::to_vec(&Cursor {
        v: 1,
        t,
        id: position.id.clone(),
    })
    .unwrap_or_default();
    json.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The position `cursor` names; `None` when this agent did not write it.
pub(super) fn read(cursor: &str) -> Option<ListPosition> {
    if !cursor.len().is_multiple_of(2) || cursor.len() > 4096 {
        return None;
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(cursor.get(at..at + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let read: Cursor = serde_json::from_slice(&bytes).ok()?;
    if read.v != 1 {
        return None;
    }
    let updated_at = match read.t {
        None => None,
        Some((secs, nanos)) if nanos < 1_000_000_000 => Some(if secs >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs as u64, nanos))?
        } else {
            SystemTime::UNIX_EPOCH
                .checked_sub(Duration::from_secs(secs.unsigned_abs()))?
                .checked_add(Duration::from_nanos(u64::from(nanos)))?
        }),
        Some(_) => return None,
    };
    Some(ListPosition {
        updated_at,
        id: read.id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #49: `session/list`'s cursor carries the last session's time (to the
    /// nanosecond, before 1970 too) and id; text this agent did not write is refused.
    #[test]
    fn a_list_cursor_reads_back_what_it_wrote_and_nothing_else() {
        for updated_at in [
            None,
            Some(SystemTime::UNIX_EPOCH + Duration::new(1_790_000_000, 123_456_789)),
            Some(SystemTime::UNIX_EPOCH - Duration::new(5, 250_000_000)),
            Some(SystemTime::UNIX_EPOCH - Duration::from_secs(7)),
        ] {
            let position = ListPosition {
                updated_at,
                id: "sess_é\"1".into(),
            };
            let cursor = super::write(&position);
            assert_eq!(super::read(&cursor), Some(position));
        }
        for foreign in [
            "offset:50",
            "",
            "zz",
            "7b7d",
            "abc",
            "7b2276223a322c2274223a6e756c6c2c226964223a2278227d",
        ] {
            assert_eq!(super::read(foreign), None, "{foreign}");
        }
    }
}
