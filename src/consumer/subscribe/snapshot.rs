//! The local snapshot: a subscription's last good mapping, instances and metadata on disk.
//!
//! Written atomically (a temporary file in the same directory, fsync, rename, fsync of the
//! directory), so a crash leaves the old snapshot or the new one, never a mix. The file is a
//! header line `introspect-snapshot/1 <sha256 of the body>` and a JSON body; a snapshot
//! whose checksum, JSON or content does not check out is refused (the caller ignores it with
//! a warning). A consumer that starts while the store is unreachable serves from it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::consumer::subscription::Subscription;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{MetadataInfo, ServiceInstance};

/// The first word of a snapshot file.
const MAGIC: &str = "introspect-snapshot/1";
/// The largest snapshot file read.
pub const MAX_SNAPSHOT_BYTES: u64 = 256 * 1024 * 1024;

/// Where a resolver's subscriptions keep their snapshots: one file per subscription in a
/// directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotOptions {
    dir: PathBuf,
}

impl SnapshotOptions {
    /// Snapshots kept in the directory `dir` (created when a subscription starts, if
    /// missing); temporary files are created in it too.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SnapshotOptions { dir: dir.into() }
    }

    /// Creates the directory if it is missing; fails, saying which directory and why,
    /// when it cannot.
    pub(crate) async fn create_dir(&self) -> Result<()> {
        let dir = self.dir.clone();
        let created = tokio::task::spawn_blocking(move || std::fs::create_dir_all(&dir))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        created.map_err(|e| {
            Error::config(format!(
                "the snapshot directory {} cannot be created: {e}",
                self.dir.display()
            ))
            .caused_by(e)
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The snapshot file of `subscription`: named by a hash of what it asks for.
    pub fn path_for(&self, subscription: &Subscription) -> PathBuf {
        let key = serde_json::to_vec(&key_of(subscription)).unwrap_or_default();
        let name = hex::encode(&Sha256::digest(&key)[..8]);
        self.dir.join(format!("{name}.snapshot"))
    }
}

/// What a snapshot holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The subscription it was written for: interface, then group, version and protocol
    /// (empty: any), then the `provided_by` apps.
    pub subscription: (String, String, String, String, Vec<String>),
    /// The apps providing the interface.
    pub apps: BTreeSet<String>,
    /// The instances routed to, by app.
    pub instances: BTreeMap<String, Vec<ServiceInstance>>,
    /// The metadata of every revision in use.
    pub metadata: Vec<MetadataInfo>,
}

/// The identity of a subscription as written in a snapshot.
pub(crate) fn key_of(s: &Subscription) -> (String, String, String, String, Vec<String>) {
    let or_empty = |v: &Option<String>| v.clone().unwrap_or_default();
    (
        s.interface.clone(),
        or_empty(&s.group),
        or_empty(&s.version),
        or_empty(&s.protocol),
        s.provided_by.clone(),
    )
}

impl Snapshot {
    /// Whether the snapshot was written for `subscription`.
    pub fn is_for(&self, subscription: &Subscription) -> bool {
        self.subscription == key_of(subscription)
    }

    /// The file form: header line with the body's checksum, then the JSON body.
    pub fn encode(&self) -> Vec<u8> {
        Self::frame(&serde_json::to_vec(self).expect("snapshot always serializes"))
    }

    /// Puts the header line with `body`'s checksum in front of `body`.
    pub fn frame(body: &[u8]) -> Vec<u8> {
        let mut out = format!("{MAGIC} {}\n", hex::encode(Sha256::digest(body))).into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// Parses and checks the file form: header, checksum, JSON, and every instance and
    /// metadata info within `limits`.
    pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Self> {
        let bad = |reason: &str| Error::malformed("snapshot", reason.to_owned());
        let newline = bytes
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| bad("no header line"))?;
        let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| bad("header"))?;
        let body = &bytes[newline + 1..];
        let checksum = header
            .strip_prefix(MAGIC)
            .and_then(|rest| rest.strip_prefix(' '))
            .ok_or_else(|| bad("unknown format"))?;
        if hex::encode(Sha256::digest(body)) != checksum {
            return Err(bad("checksum mismatch (truncated or corrupt)"));
        }
        let snapshot: Snapshot =
            serde_json::from_slice(body).map_err(|e| Error::unparsable("snapshot", e))?;
        for (app, instances) in &snapshot.instances {
            for instance in instances {
                instance.validate()?;
                if &instance.service_name != app {
                    return Err(bad("instance listed under another app"));
                }
            }
        }
        for info in &snapshot.metadata {
            info.validate(limits)?;
        }
        Ok(snapshot)
    }

    /// Writes the snapshot to `path` atomically: temporary file, fsync, rename, fsync of
    /// the directory.
    pub fn write_atomic(&self, path: &Path) -> Result<()> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .ok_or_else(|| Error::config(format!("snapshot path {path:?} has no file name")))?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            file.write_all(&self.encode())?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&tmp, path)?;
            // Make the rename itself durable; not every platform can open a directory.
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        Ok(written?)
    }

    /// Reads the snapshot at `path`; `Ok(None)` when there is none.
    pub fn read(path: &Path, limits: &Limits) -> Result<Option<Self>> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let size = file.metadata()?.len();
        if size > MAX_SNAPSHOT_BYTES {
            return Err(Error::TooLarge {
                what: "snapshot",
                size: usize::try_from(size).unwrap_or(usize::MAX),
                limit: MAX_SNAPSHOT_BYTES as usize,
            });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_SNAPSHOT_BYTES),
            &mut bytes,
        )?;
        Self::decode(&bytes, limits).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    fn sample() -> Snapshot {
        let info = MetadataInfo::new("shop", [ServiceInfo::new("shop.OrderService")]).unwrap();
        let mut instance = ServiceInstance::new("shop", "10.0.0.1", 50051);
        instance
            .metadata
            .insert(crate::model::keys::REVISION.into(), info.revision.clone());
        Snapshot {
            subscription: key_of(&Subscription::new("shop.OrderService")),
            apps: ["shop".to_owned()].into(),
            instances: [("shop".to_owned(), vec![instance])].into(),
            metadata: vec![info],
        }
    }

    #[test]
    fn round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders.snapshot");
        assert_eq!(Snapshot::read(&path, &Limits::default()).unwrap(), None);
        sample().write_atomic(&path).unwrap();
        sample().write_atomic(&path).unwrap();
        let back = Snapshot::read(&path, &Limits::default()).unwrap().unwrap();
        assert_eq!(back, sample());
        assert!(back.is_for(&Subscription::new("shop.OrderService")));
        assert!(!back.is_for(&Subscription::new("shop.OrderService").group("g")));
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file left behind");
    }

    #[test]
    fn truncated_or_corrupt_snapshots_are_refused() {
        let bytes = sample().encode();
        let limits = Limits::default();
        for cut in [0, 5, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                Snapshot::decode(&bytes[..cut], &limits).is_err(),
                "cut {cut}"
            );
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 0x20;
        assert!(Snapshot::decode(&flipped, &limits).is_err());
        assert!(Snapshot::decode(b"garbage\n{}", &limits).is_err());
        // A correct checksum over a hostile body is still checked.
        let body = br#"{"subscription":["a","","","",[]],"apps":[],"instances":{"a":[{"serviceName":"a/b","host":"h","port":1}]},"metadata":[]}"#;
        let mut file = format!("{MAGIC} {}\n", hex::encode(Sha256::digest(body))).into_bytes();
        file.extend_from_slice(body);
        assert!(Snapshot::decode(&file, &limits).is_err());
    }
}
