//! The routing chain of one call input, as Dubbo Java 3.3's `RouterChain` runs it: an
//! ordered list of steps, each a pure router over the providers the previous left, that
//! narrows them and says why. Providers disabled by their parameters (after
//! configurators) are never candidates; then the steps of [`CHAIN`], in Java's order:
//!
//! | step | Java's router (order) | file |
//! | --- | --- | --- |
//! | tag rule of the providers' app, else static tags | `TagStateRouter` (100) | `tag` |
//! | condition rules of the service | `ServiceStateRouter` (140) | `condition` |
//! | condition rules of the providers' app | `ProviderAppStateRouter` (145) | `condition` |
//! | condition rules of the consumer's app | `AppStateRouter` (150) | `condition` |
//!
//! A v3.1 condition rule splits the chain into weighted destinations that each call
//! chooses among; the steps after it run once per destination, so the outcome is a short
//! list of weighted choices ([`Routing`]), and a call's choice costs one weighted draw.
//! Pure: the balancer caches the outcome per distinct input.
//!
//! Adding a rule kind (a mesh rule, an affinity rule) is one file with a [`Step`] and one
//! line in [`CHAIN`], where its place gives its order.
//!
//! * `routing`: the outcome ([`Routing`], [`Choice`]).
//! * `walk`: the choices as the steps narrow them, and what each provider was routed out by.
//! * `tag`, `condition`: the steps.

mod condition;
mod routing;
mod tag;
mod walk;

pub use routing::{Choice, Routing};

use self::condition::{ConditionStep, Scope};
use self::tag::TagStep;
use self::walk::Walk;
use super::facts::{CallFacts, ProviderFacts};
use super::rule_set::RuleSet;

/// What every step reads: the rules in force, the call, and the providers (indices into
/// which the steps narrow).
struct Input<'a> {
    rules: &'a RuleSet,
    call: &'a CallFacts<'a>,
    providers: &'a [ProviderFacts<'a>],
}

/// One step of the chain, Java's `StateRouter`: it narrows each choice of `walk` by the
/// rules of its kind in force (none: it leaves them as they are), through
/// [`Walk::narrow`].
trait Step: Sync {
    /// Narrows the choices of `walk` for `input`.
    fn route(&self, input: &Input<'_>, walk: &mut Walk);
}

/// The chain, in the order its steps run (Java's router order).
const CHAIN: &[&dyn Step] = &[
    &TagStep,
    &ConditionStep(Scope::Service),
    &ConditionStep(Scope::ProviderApp),
    &ConditionStep(Scope::ConsumerApp),
];

/// Routes a call with `call` over `providers`, of which those with `enabled[i]` false are
/// disabled, under `rules`.
pub fn route(
    rules: &RuleSet,
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
    enabled: &[bool],
) -> Routing {
    let mut walk = match Walk::new(providers.len(), enabled) {
        Ok(walk) => walk,
        Err(none) => return none,
    };
    let input = Input {
        rules,
        call,
        providers,
    };
    for step in CHAIN {
        step.route(&input, &mut walk);
    }
    walk.finish()
}
