//! A `DoomLoopDetector` in a snapshot: its settings, counters, recent actions and the last
//! response's verdict.

use crate::chant::{read_event, write_event, Chant, HashKey};
use crate::fingerprint::{Sketch, SKETCH_SIZE};
use crate::policy::ActionLimits;
use crate::settings::Value;
use crate::snapshot::{invalid, open, seal, Reader, SnapshotError, SnapshotKind, Writer};

use super::*;

/// Longest action-type name a snapshot may carry.
const MAX_SNAPSHOT_NAME: usize = 1 << 16;

fn write_sketch(w: &mut Writer, sketch: &Sketch) {
    w.bool(sketch.is_complete());
    w.len(sketch.hashes().len());
    for &hash in sketch.hashes() {
        w.u64(hash);
    }
}

fn read_sketch(r: &mut Reader<'_>) -> Result<Sketch, SnapshotError> {
    let complete = r.bool("a sketch")?;
    let n = r.len("a sketch", SKETCH_SIZE)?;
    let mut hashes = Vec::with_capacity(n);
    for _ in 0..n {
        hashes.push(r.u64("a sketch")?);
    }
    Sketch::from_parts(&hashes, complete).ok_or_else(|| invalid("a sketch's hashes are not strictly ascending"))
}

fn write_preview(w: &mut Writer, preview: &Preview) {
    w.bool(preview.cut);
    let len = usize::from(preview.len).min(PREVIEW_BYTES);
    w.len(len);
    w.bytes(&preview.bytes[..len]);
}

fn read_preview(r: &mut Reader<'_>) -> Result<Preview, SnapshotError> {
    let cut = r.bool("a preview")?;
    let n = r.len("a preview", PREVIEW_BYTES)?;
    let text = std::str::from_utf8(r.bytes(n, "a preview")?).map_err(|_| invalid("a preview is not UTF-8"))?;
    let mut preview = Preview::new(text);
    if usize::from(preview.len) != n {
        return Err(invalid("a preview does not fit"));
    }
    preview.cut = cut;
    Ok(preview)
}

/// The newest action's policy thresholds, after a presence byte.
fn read_limits(r: &mut Reader<'_>) -> Result<Option<ActionLimits>, SnapshotError> {
    let what = "the newest action's policy";
    match r.u8(what)? {
        0 => Ok(None),
        1 => {
            let mut threshold = || match r.u64(what)? {
                0 => Err(invalid("a policy threshold is 0")),
                value => Ok(value),
            };
            Ok(Some(ActionLimits {
                identical: threshold()?,
                similar: threshold()?,
                failures: threshold()?,
                no_progress: threshold()?,
            }))
        }
        other => Err(invalid(format!("{what} has presence byte {other}"))),
    }
}

fn loop_type_of(byte: u8) -> Result<LoopType, SnapshotError> {
    Ok(match byte {
        0 => LoopType::RepeatedAction,
        1 => LoopType::RepeatedFailure,
        2 => LoopType::NoProgress,
        3 => LoopType::CircularPlan,
        4 => LoopType::ResourceExhaustion,
        5 => LoopType::RepeatedOutput,
        other => return Err(invalid(format!("loop type {other}"))),
    })
}

impl Session {
    /// The state as a snapshot under the checked [`SESSION`] values it was built
    /// from, and the offset in it of the session clock's f64 (None: the clock is not
    /// started). The session clock is saved as the time elapsed at `now`, so a restored
    /// detector keeps counting from there on whatever clock it gets; a snapshot of the same
    /// state later differs only there (see `resealed_with_f64`). `None` in the middle of a
    /// streamed response (its windows are not saved): end the response first.
    pub fn snapshot(&self, settings: &[Value], now: f64) -> Option<(Vec<u8>, Option<usize>)> {
        if self.output_open {
            return None;
        }
        let mut clock_at = None;
        let bytes = seal(SnapshotKind::Session, &SESSION, |w| {
            w.settings(settings);
            let records: Vec<&ActionRecord> = self.history.iter_newest_first().collect();
            w.len(records.len());
            for r in records.into_iter().rev() {
                w.u64(r.identity);
                w.u64(r.kind);
                w.u64(r.result);
                w.bool(r.failed);
            }
            for run in [
                self.identical_run,
                self.similar_run,
                self.failure_run,
                self.same_result_run,
            ] {
                w.u64(run);
            }
            w.len(self.period_runs.len());
            for &run in &self.period_runs {
                w.u64(run);
            }
            w.opt_u64(self.last_marker_at);
            w.len(self.plan_order.len());
            for digest in &self.plan_order {
                w.u64(*digest);
                let visit = self.plan_visits.get(digest);
                w.u64(visit.map_or(0, |v| v.count));
                w.u64(visit.map_or(0, |v| v.markers_at_first_visit));
            }
            w.opt_u64(self.last_plan);
            match self.started_at {
                Some(start) => {
                    w.u8(1);
                    clock_at = Some(w.position());
                    w.f64(now - start);
                }
                None => w.u8(0),
            }
            let st = &self.stats;
            for count in [
                st.total_actions,
                st.successful_actions,
                st.failed_actions,
                st.loop_events,
                st.recovery_attempts,
                st.progress_markers,
            ] {
                w.u64(count);
            }
            w.f64(st.current_backoff);
            w.opt_u64(self.last_type.map(|t| t as u64));
            let key = self.output_key;
            w.u64(key.base);
            w.u64(key.salt);
            write_event(w, self.output_event());
            let recent = self.recent_types.oldest_first_with_digests();
            w.len(recent.len());
            for (digest, name) in recent {
                w.u64(digest);
                w.str(name);
            }
            // doomloop's argument and response rules (the response draft is not saved: it
            // starts afresh with the next response). State not allocated yet is saved as
            // empty: the same bytes either way.
            let kept = self.arguments.as_deref().copied().unwrap_or_default();
            write_sketch(w, &kept.sketch);
            w.u64(self.alike_run);
            w.u64(self.alike_failure_run);
            write_preview(w, &kept.preview);
            let responses = self.responses.as_deref();
            match responses.and_then(|r| r.last.as_ref()) {
                Some(last) => {
                    w.u8(1);
                    write_sketch(w, &last.sketch);
                    write_preview(w, &last.preview);
                    w.u64(last.actions_at);
                }
                None => w.u8(0),
            }
            w.u64(responses.map_or(0, |r| r.run));
            // Last, so a snapshot written before these existed still reads: the newest
            // failure digest, then the newest action's policy thresholds.
            w.u64(kept.failure);
            match self.limits {
                Some(limits) => {
                    w.u8(1);
                    for threshold in [limits.identical, limits.similar, limits.failures, limits.no_progress] {
                        w.u64(threshold);
                    }
                }
                None => w.u8(0),
            }
        });
        Some((bytes, clock_at))
    }

    /// The session a [`Session::snapshot`] saved, its clock restarted at `now`, the settings
    /// it was made with, and the offset of its clock's f64 in `data` (as `snapshot` gives it).
    pub fn restore(data: &[u8], now: f64) -> Result<(Session, Vec<Value>, Option<usize>), SnapshotError> {
        let mut r = open(data, SnapshotKind::Session, &SESSION)?;
        let settings = r.settings(&SESSION)?;
        let config = SessionConfig::from_values(&settings);
        if let Some((name, problem)) = config.problem() {
            return Err(invalid(format!("{name} {problem}")));
        }
        let mut s = Session::new(config);
        let records = r.len("the history", s.history.capacity())?;
        for _ in 0..records {
            let record = ActionRecord {
                identity: r.u64("an action")?,
                kind: r.u64("an action")?,
                result: r.u64("an action")?,
                failed: r.bool("an action")?,
            };
            s.history.push(record);
        }
        s.identical_run = r.u64("the runs")?;
        s.similar_run = r.u64("the runs")?;
        s.failure_run = r.u64("the runs")?;
        s.same_result_run = r.u64("the runs")?;
        let periods = r.len("the cycle runs", s.period_runs.len())?;
        if periods != s.period_runs.len() {
            return Err(invalid(format!(
                "{periods} cycle runs, {} expected",
                s.period_runs.len()
            )));
        }
        for run in s.period_runs.iter_mut() {
            *run = r.u64("the cycle runs")?;
        }
        s.last_marker_at = r.opt_u64("the last marker")?;
        let plans = r.len("the plan states", PLAN_STATES_CAP)?;
        for _ in 0..plans {
            let digest = r.u64("a plan state")?;
            let count = r.u64("a plan state")?;
            let markers_at_first_visit = r.u64("a plan state")?;
            if s.plan_visits
                .insert(
                    digest,
                    PlanVisit {
                        count,
                        markers_at_first_visit,
                    },
                )
                .is_some()
            {
                return Err(invalid("a plan state is listed twice"));
            }
            s.plan_order.push_back(digest);
        }
        s.last_plan = r.opt_u64("the last plan state")?;
        let mut clock_at = None;
        s.started_at = match r.u8("the session clock")? {
            0 => None,
            1 => {
                clock_at = Some(r.position());
                let elapsed = r.f64("the session clock")?;
                if !elapsed.is_finite() {
                    return Err(invalid("the session's elapsed time is not finite"));
                }
                Some(now - elapsed)
            }
            other => return Err(invalid(format!("the session clock has presence byte {other}"))),
        };
        let mut counts = [0u64; 6];
        for count in &mut counts {
            *count = r.u64("the stats")?;
        }
        let [total_actions, successful_actions, failed_actions, loop_events, recovery_attempts, progress_markers] =
            counts;
        let current_backoff = r.f64("the stats")?;
        if !(0.0..=s.config.max_backoff.max(s.config.initial_backoff)).contains(&current_backoff) {
            return Err(invalid(format!(
                "the current backoff {current_backoff} is out of range"
            )));
        }
        s.stats = SessionStats {
            total_actions,
            successful_actions,
            failed_actions,
            loop_events,
            recovery_attempts,
            progress_markers,
            current_backoff,
        };
        s.last_type = match r.opt_u64("the last loop type")? {
            Some(t) => Some(loop_type_of(
                u8::try_from(t).map_err(|_| invalid(format!("loop type {t}")))?,
            )?),
            None => None,
        };
        let key = HashKey {
            base: r.u64("the output hash key")?,
            salt: r.u64("the output hash key")?,
        };
        let event = read_event(&mut r, "the output verdict", s.config.content_chunk_size, |_, _, _| {
            Ok(())
        })?;
        // As the detector holds it (an odd base), so a restored session saves the key it uses.
        s.output_key = HashKey {
            base: key.base | 1,
            ..key
        };
        s.output = event.map(|event| Box::new(Chant::finished(s.config.chant_config(), s.output_key, Some(event))));
        let recent = r.len("the recent action types", RECENT_TYPES)?;
        for _ in 0..recent {
            let digest = r.u64("a recent action type")?;
            let name = r.str("a recent action type", MAX_SNAPSHOT_NAME)?;
            s.recent_types.push(digest, name);
        }
        let kept = ArgumentState {
            sketch: read_sketch(&mut r)?,
            preview: Preview::default(),
            failure: 0,
        };
        s.alike_run = r.u64("the alike runs")?;
        s.alike_failure_run = r.u64("the alike runs")?;
        let kept = ArgumentState {
            preview: read_preview(&mut r)?,
            ..kept
        };
        let last = match r.u8("the last response")? {
            0 => None,
            1 => Some(LastResponse {
                sketch: read_sketch(&mut r)?,
                preview: read_preview(&mut r)?,
                actions_at: r.u64("the last response")?,
            }),
            other => return Err(invalid(format!("the last response has presence byte {other}"))),
        };
        let run = r.u64("the response run")?;
        // An older snapshot has no failure digest: its rule compared the newest result.
        let failure = if r.remaining() == 0 {
            s.history.back(0).map_or(0, |newest| newest.result)
        } else {
            r.u64("the newest failure")?
        };
        let kept = ArgumentState { failure, ..kept };
        s.limits = if r.remaining() == 0 { None } else { read_limits(&mut r)? };
        // Allocated as the rules would have: the arguments' state where descriptions name
        // actions, the responses' once one was recorded.
        if s.config.names_actions() {
            s.arguments = Some(Box::new(kept));
        }
        if last.is_some() || run > 0 {
            s.responses = Some(Box::new(ResponseState {
                draft: ResponseDraft::new(),
                last,
                run,
            }));
        }
        r.finish()?;
        Ok((s, settings, clock_at))
    }
}
