//! Workload identity: the certificate of an endpoint must name the app it was resolved for,
//! so that a registry that lies cannot redirect traffic.
//!
//! TLS alone proves that a server's certificate comes from a trusted CA, not *which* app it
//! belongs to: any process that can write the registry (a compromised or misconfigured
//! service, anyone holding a provider's registry credentials) can register itself under
//! `shop-payments` and, with a valid certificate for `shop-orders`, receive the payment
//! calls. A consumer resolves every endpoint *for an app*, so it knows which identity to
//! expect: with an [`IdentityCheck`] it accepts a server only when its certificate chains
//! to the check's CAs, is for server authentication and names that app by the
//! [`IdentityRule`] (a DNS SAN `{app}` or `{app}.{suffix}`, or a URI SAN such as the SPIFFE
//! ID `spiffe://{trust-domain}/app/{app}`).
//!
//! What it protects: an app's calls and metadata fetches reach only servers holding a key
//! whose certificate names the app. What it does not: a holder of the app's own key (a
//! compromised instance of the app, a CA that issues the app's name to others) is the app
//! as far as any certificate can tell.
//!
//! On the consumer ([`ResolverBuilder::identity`](crate::consumer::ResolverBuilder::identity)):
//!
//! * every MetadataService call checks the instance's certificate for its app; a refused
//!   instance is not asked again for that fetch, and the next instance of the revision is;
//! * a balanced channel dials (and checks) each endpoint *before* handing it to the
//!   balancer, so the first call never goes to a server that fails. A rejected endpoint is
//!   removed, not set aside: it takes no call, it is not among the endpoints panic mode
//!   routes to, and a health probe, which only opens a TCP connection (a rogue answers
//!   TCP), cannot bring it back; it rejoins only once a TLS handshake, tried every
//!   [`IdentityCheck::recheck_interval`], passes the check. Every later connection to an
//!   endpoint is checked too: one that presents another certificate then is removed at
//!   once. When every endpoint of a channel is rejected, calls fail at once with
//!   UNAVAILABLE saying why;
//! * rejections are counted per app (`ResolverStats::identity_rejections`,
//!   `Resolver::identity_rejections_per_app`, the metric
//!   `introspect_app_identity_rejections_total{app}`): each refused MetadataService call,
//!   and a channel's endpoint once per refusal of a first check or a reconnection, and on a
//!   recheck only when the cause changed. They are logged at most once per interval for
//!   each app, cause and presented names, naming the name expected and the names the
//!   certificate presents (never more of it).
//!
//! On the provider, [`ServerIdentity`] holds the app's certificate and key: its
//! [`ServerIdentity::tls_config`] configures the app's servers, and
//! [`ProviderBuilder::identity`](crate::provider::ProviderBuilder::identity) makes `start()`
//! and `serve()` fail with [`Error::IdentityMismatch`](crate::error::Error::IdentityMismatch) when
//! the certificate does not name the app.
//!
//! One concept per file: `rule` (the name an app's certificate must carry, pure),
//! `presented` (the names a certificate presents), `verifier` (chain and name, the rustls
//! verifier), `check` (the consumer's configuration), `server` (the provider's).

mod check;
mod presented;
mod rule;
mod server;
#[cfg(test)]
mod test_certs;
mod verifier;

pub use check::IdentityCheck;
pub use rule::IdentityRule;
pub use server::ServerIdentity;
