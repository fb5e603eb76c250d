//! A `ToolLoopDetector` in a snapshot: its settings, history, warning buckets, guard, names
//! and counts.

use crate::settings::Schema;
use crate::snapshot::{invalid, Reader, Snapshot, SnapshotError, SnapshotKind, Writer};

use super::*;

/// Longest tool name a snapshot may carry (names are display text; real ones are short).
const MAX_SNAPSHOT_NAME: usize = 1 << 16;

impl Snapshot for NamedSession {
    const KIND: SnapshotKind = SnapshotKind::ToolLoop;

    fn schema() -> &'static Schema {
        &TOOL_LOOP
    }

    fn write_body(&self, w: &mut Writer) {
        w.settings(&self.settings);
        let s = &self.session;
        w.len(s.history.len());
        for back in (0..s.history.len()).rev() {
            let Some(r) = s.history.back(back) else {
                continue;
            };
            let ids = s.ids(back);
            let run = if r.has(HAS_RUN) {
                s.runs.get(r.run as usize).copied().unwrap_or(0)
            } else {
                0
            };
            for digest in [r.tool, r.args, run, ids.call_id, r.result, ids.unknown] {
                w.u64(digest);
            }
            w.u8(r.flags);
        }
        w.len(s.buckets.entries.len());
        for &(key, bucket) in &s.buckets.entries {
            w.u64(key);
            w.u32(bucket);
        }
        w.u32(s.guard.remaining);
        w.len(s.guard.window.len());
        for &(tool, args, result) in &s.guard.window {
            w.u64(tool);
            w.u64(args);
            w.u64(result);
        }
        w.len(self.names.len());
        for (digest, name) in self.names.iter() {
            w.u64(digest);
            w.str(name);
        }
        w.opt_u64(self.blocking);
        let t = &self.stats;
        for count in [
            t.calls,
            t.warnings,
            t.blocks,
            t.blocked_episodes,
            t.outcomes,
            t.guard_aborts,
        ] {
            w.u64(count);
        }
    }

    fn read_body(r: &mut Reader<'_>) -> Result<Self, SnapshotError> {
        let (mut state, _) = NamedSession::new(r.settings(&TOOL_LOOP)?);
        let s = &mut state.session;
        let records = r.len("the history", s.history.capacity())?;
        for _ in 0..records {
            let mut digests = [0u64; 6];
            for digest in &mut digests {
                *digest = r.u64("a record")?;
            }
            let flags = r.u8("a record")?;
            if flags & !(HAS_RUN | HAS_CALL_ID | HAS_RESULT | HAS_UNKNOWN) != 0 {
                return Err(invalid(format!("a record has unknown flags {flags:#x}")));
            }
            let [tool, args, run, call_id, result, unknown] = digests;
            if flags & HAS_RUN == 0 && run != 0 {
                // The engine writes 0 for a record without a run id (it keeps no digest).
                return Err(invalid(format!("a record without a run id has run digest {run:#x}")));
            }
            let record = Record {
                tool,
                args,
                run: if flags & HAS_RUN == 0 { 0 } else { s.run_index(run) },
                result,
                flags,
                payload: (),
            };
            s.push(record, Ids { call_id, unknown });
        }
        let keys = r.len("the warning keys", MAX_WARNING_KEYS)?;
        for _ in 0..keys {
            let key = r.u64("a warning key")?;
            let bucket = r.u32("a warning key")?;
            s.buckets.entries.push_back((key, bucket));
        }
        let window_size = s.guard.window_size as usize;
        let remaining = r.u32("the guard")?;
        let seen = r.len("the guard window", window_size)?;
        // While armed every attempt used is in the window; once over, the window is freed.
        let consistent = remaining as usize + seen == window_size || (remaining == 0 && seen == 0);
        if !consistent {
            return Err(invalid(format!(
                "the guard has {remaining} attempts left after {seen} of a window of {window_size}"
            )));
        }
        s.guard.remaining = remaining;
        for _ in 0..seen {
            let triple = (
                r.u64("the guard window")?,
                r.u64("the guard window")?,
                r.u64("the guard window")?,
            );
            s.guard.window.push(triple);
        }
        let limit = 4 * s.history.capacity() + 16;
        let names = r.len("the names", limit)?;
        for _ in 0..names {
            let digest = r.u64("a name")?;
            let name = r.str("a name", MAX_SNAPSHOT_NAME)?;
            state.names.remember(digest, name, usize::MAX, std::iter::empty);
        }
        state.blocking = r.opt_u64("the blocked episode")?;
        let mut counts = [0u64; 6];
        for count in &mut counts {
            *count = r.u64("the stats")?;
        }
        let [calls, warnings, blocks, blocked_episodes, outcomes, guard_aborts] = counts;
        state.stats = ToolLoopStats {
            calls,
            warnings,
            blocks,
            blocked_episodes,
            outcomes,
            guard_aborts,
        };
        Ok(state)
    }
}
