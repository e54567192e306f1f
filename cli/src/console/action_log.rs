//! The action log: who changed what, when, through this console (see the `actions` module).
//!
//! Each action a caller with access asks for is recorded once it is decided: when, which
//! session (its label, see [`super::auth`]) from which client address, the action, the
//! app and instance, the key and group written, the versions before and after, and the
//! outcome (`ok`, `conflict`, `refused`, `error`). The console keeps the last
//! [`MAX_ACTIONS`] in memory (`GET /api/audit`) and writes each to its log at info level
//! (target `introspect_cli::console::action_log`; the tool logs warnings only unless
//! `RUST_LOG` says more). Nothing survives a restart: the config centre keeps the rules,
//! the process's log keeps the history.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

/// The most actions kept in memory; older ones remain in the log only.
pub const MAX_ACTIONS: usize = 1000;

/// One action as recorded.
#[derive(Clone, Debug, Serialize)]
pub struct ActionRecord {
    /// Its number in this console's life, from 1.
    pub id: u64,
    /// When it was decided, in ms since the epoch.
    pub at_ms: u64,
    /// Who: `session:LABEL` or `bearer`.
    pub session: String,
    /// The client's address as the console's socket saw it.
    pub client: String,
    /// `disable`, `enable`, `weight`, `clear-weight`, `tag`, `untag`.
    pub action: String,
    /// The app.
    pub app: String,
    /// The instance, `host:port`.
    pub address: String,
    /// The weight or tag asked for, when the action has one.
    pub value: Option<String>,
    /// The config key it edits.
    pub key: String,
    /// The config group.
    pub group: String,
    /// `ok`, `conflict` (someone else changed the rule: twice, or once and the retry failed
    /// too), `refused` (bad input, or a rule that cannot be merged into), `error` (the
    /// config centre failed).
    pub outcome: &'static str,
    /// With `ok`: `written`, `deleted` or `unchanged` (the rule already said it).
    pub change: Option<&'static str>,
    /// The rule's version read before the write, if it existed.
    pub version_before: Option<String>,
    /// Its version after (`None` when deleted, or absent).
    pub version_after: Option<String>,
    /// Whether a conflict was retried once.
    pub retried: bool,
    /// Why it did not succeed.
    pub error: Option<String>,
}

/// The bounded list and its counter.
#[derive(Default)]
pub struct ActionLog {
    inner: Mutex<(u64, VecDeque<ActionRecord>)>,
}

impl ActionLog {
    /// Records `record` (its `id` is assigned here), logs it, and returns it as kept.
    pub fn record(&self, mut record: ActionRecord) -> ActionRecord {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.0 += 1;
        record.id = inner.0;
        if inner.1.len() >= MAX_ACTIONS {
            inner.1.pop_front();
        }
        inner.1.push_back(record.clone());
        drop(inner);
        tracing::info!(
            id = record.id,
            session = %record.session,
            client = %record.client,
            action = %record.action,
            app = %record.app.escape_debug(),
            address = %record.address.escape_debug(),
            value = ?record.value,
            key = %record.key.escape_debug(),
            group = %record.group,
            outcome = record.outcome,
            change = ?record.change,
            version_before = ?record.version_before,
            version_after = ?record.version_after,
            retried = record.retried,
            error = ?record.error,
            "console action"
        );
        record
    }

    /// The kept actions, newest first, and how many were recorded in all.
    pub fn list(&self) -> (Vec<Value>, u64) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let kept = inner
            .1
            .iter()
            .rev()
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            .collect();
        (kept, inner.0)
    }
}

/// The actions' shared state: their log, and the turn they take (the console's own
/// actions go one at a time, so two of its users never conflict with each other).
#[derive(Default)]
pub struct Actions {
    /// Every decided action.
    pub log: ActionLog,
    /// Held by the action being carried out.
    pub(super) turn: tokio::sync::Mutex<()>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(app: &str) -> ActionRecord {
        ActionRecord {
            id: 0,
            at_ms: 1,
            session: "bearer".into(),
            client: "127.0.0.1:5".into(),
            action: "disable".into(),
            app: app.into(),
            address: "10.0.0.7:20880".into(),
            value: None,
            key: format!("{app}.configurators"),
            group: "dubbo".into(),
            outcome: "ok",
            change: Some("written"),
            version_before: None,
            version_after: Some("3".into()),
            retried: false,
            error: None,
        }
    }

    #[test]
    fn the_log_keeps_the_newest_and_counts_all() {
        let log = ActionLog::default();
        for n in 0..MAX_ACTIONS + 5 {
            log.record(record(&format!("app{n}")));
        }
        let (kept, total) = log.list();
        assert_eq!(total, (MAX_ACTIONS + 5) as u64);
        assert_eq!(kept.len(), MAX_ACTIONS);
        assert_eq!(kept[0]["app"], format!("app{}", MAX_ACTIONS + 4));
        assert_eq!(kept[0]["id"], MAX_ACTIONS + 5);
        assert_eq!(kept[MAX_ACTIONS - 1]["app"], "app5");
    }
}
