//! A naming subscription of one service: the SDK calls its listener on each push of the
//! service's list, and the listener raises a "changed" signal that a follow task waits on.

use std::sync::Arc;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse};
use nacos_sdk::api::naming::{NamingChangeEvent, NamingEventListener, NamingService};
use tokio::sync::mpsc;

use nacos_sdk::api::error::Error as SdkError;

/// Turns the SDK's callbacks into "changed" signals: at most one waits, later ones fold into
/// it (the follow reads the newest state anyway).
pub(super) struct Changed(pub(super) mpsc::Sender<()>);

impl NamingEventListener for Changed {
    fn event(&self, _event: Arc<NamingChangeEvent>) {
        let _ = self.0.try_send(());
    }
}

impl ConfigChangeListener for Changed {
    fn notify(&self, _config: ConfigResponse) {
        let _ = self.0.try_send(());
    }
}

/// A live subscription of `{group}@@{service}` on one naming client.
pub(super) struct Subscription {
    naming: NamingService,
    service: String,
    group: String,
    listener: Arc<dyn NamingEventListener>,
}

impl Subscription {
    /// Subscribes to `{group}@@{service}`; each push raises `changed`. A refused
    /// subscription is given up again (the server may hold it all the same) before the
    /// SDK's error is returned.
    pub(super) async fn start(
        naming: &NamingService,
        service: &str,
        group: &str,
        changed: mpsc::Sender<()>,
    ) -> Result<Self, SdkError> {
        let subscription = Subscription {
            naming: naming.clone(),
            service: service.to_owned(),
            group: group.to_owned(),
            listener: Arc::new(Changed(changed)),
        };
        let subscribed = naming
            .subscribe(
                subscription.service.clone(),
                Some(subscription.group.clone()),
                Vec::new(),
                subscription.listener.clone(),
            )
            .await;
        match subscribed {
            Ok(()) => Ok(subscription),
            Err(e) => {
                subscription.end().await;
                Err(e)
            }
        }
    }

    /// Gives the subscription up.
    pub(super) async fn end(self) {
        let _ = self
            .naming
            .unsubscribe(self.service, Some(self.group), Vec::new(), self.listener)
            .await;
    }
}
