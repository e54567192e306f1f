//! One ephemeral naming instance a registration holds on its naming client (the
//! connection): an app's instance, a consumer's record, an interface-level URL. What the
//! three do to it (register, replace, deregister) is written here once.

use std::sync::Mutex;
use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, ServiceInstance as NacosInstance};

use super::client::map_error;
use crate::error::{Error, Result};

/// Tries of a first registration refused as unauthenticated (see
/// [`NamingInstance::register`]).
const LOGIN_TRIES: u32 = 10;
/// The wait between them.
const LOGIN_WAIT: Duration = Duration::from_millis(300);

/// A naming instance of one service and group, on one client.
pub(super) struct NamingInstance {
    naming: NamingService,
    group: String,
    service: String,
    current: Mutex<NacosInstance>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl NamingInstance {
    /// `instance` of `service` in `group` on `naming`, not registered yet.
    pub(super) fn new(
        naming: NamingService,
        group: &str,
        service: String,
        instance: NacosInstance,
    ) -> Self {
        NamingInstance {
            naming,
            group: group.to_owned(),
            service,
            current: Mutex::new(instance),
        }
    }

    /// The naming service's name.
    pub(super) fn service(&self) -> &str {
        &self.service
    }

    /// `{group}@@{service}`, as Nacos names it.
    pub(super) fn key(&self) -> String {
        format!("{}@@{}", self.group, self.service)
    }

    /// The client, for more instances on the same connection.
    pub(super) fn naming(&self) -> &NamingService {
        &self.naming
    }

    /// What the instance is, for errors: `register {group}@@{service} {ip}:{port}`.
    fn what(&self, doing: &str, instance: &NacosInstance) -> String {
        format!("{doing} {} {}:{}", self.key(), instance.ip, instance.port)
    }

    /// Registers the instance. The SDK logs a new client in on a task of its own; a request
    /// that overtakes the login is refused as unknown, so a few tries tell that from wrong
    /// credentials.
    pub(super) async fn register(&self) -> Result<()> {
        let instance = lock(&self.current).clone();
        let what = self.what("register", &instance);
        let mut tries = 0;
        loop {
            match self.put(instance.clone(), &what).await {
                Err(Error::Unauthenticated { .. }) if tries < LOGIN_TRIES => {
                    tries += 1;
                    tokio::time::sleep(LOGIN_WAIT).await;
                }
                done => return done,
            }
        }
    }

    /// Registers `instance` in place of the one held: the one held is deregistered first
    /// when `instance` is at another address (Nacos keys an instance by its address).
    pub(super) async fn replace(&self, instance: NacosInstance) -> Result<()> {
        let previous = lock(&self.current).clone();
        if previous.ip != instance.ip || previous.port != instance.port {
            self.remove(previous).await?;
        }
        let what = self.what("update", &instance);
        self.put(instance.clone(), &what).await?;
        *lock(&self.current) = instance;
        Ok(())
    }

    /// Deregisters the instance.
    pub(super) async fn deregister(&self) -> Result<()> {
        let current = lock(&self.current).clone();
        self.remove(current).await
    }

    async fn put(&self, instance: NacosInstance, what: &str) -> Result<()> {
        self.naming
            .register_instance(self.service.clone(), Some(self.group.clone()), instance)
            .await
            .map_err(|e| map_error(e, what))
    }

    async fn remove(&self, instance: NacosInstance) -> Result<()> {
        let what = self.what("deregister", &instance);
        self.naming
            .deregister_instance(self.service.clone(), Some(self.group.clone()), instance)
            .await
            .map_err(|e| map_error(e, &what))
    }
}
