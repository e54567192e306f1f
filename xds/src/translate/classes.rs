//! The classes of calls the rules tell apart, and the route matches that tell them apart
//! (pure).
//!
//! A call's routing depends on its method (when a condition rule reads it), its tag
//! (`dubbo.tag`, `dubbo.force.tag`) and the headers condition rules read. Each of these is
//! a *dimension* whose *states* are the exact values the rules and providers name, "absent"
//! where that differs, and last a wildcard (any other value). The states of a dimension
//! other than the wildcard never match the same call (distinct exact values; absence), so
//! each call falls into exactly one class: per dimension, the first state it matches.
//!
//! One route per class, each matching its states' matchers (none for a wildcard), ordered
//! by how many wildcards it has and then by its states: every route that matches a call is
//! its class's route or a generalisation of it (a wildcard where the class is exact), and
//! those come after, so the first route a call matches is its class's. A route whose every
//! later generalisation routes alike is left out (its calls take the next one, to the same
//! place).

/// What one state of a dimension matches.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Matcher {
    /// The gRPC path `/{service}/{method}`.
    Method(String),
    /// The header equals this value.
    Header(String, String),
    /// The header equals `true`, any case (Java's boolean reading).
    HeaderTrue(String),
    /// The header is absent.
    Absent(String),
}

/// What a call's value is in one state, for evaluating the chain with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Witness {
    /// This value.
    Value(String),
    /// No value.
    Absent,
    /// Some value no rule or provider names.
    Other,
}

/// One state of a dimension: its matcher (`None`: the wildcard) and its witness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// What a route of this state matches.
    pub matcher: Option<Matcher>,
    /// The value a call of this state has.
    pub witness: Witness,
}

/// One dimension: what it reads and its states, the wildcard last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dimension {
    /// What it reads: `method`, or a header's name.
    pub reads: String,
    /// Its states, most specific first, the wildcard last.
    pub states: Vec<State>,
}

impl Dimension {
    /// A dimension over the gRPC method, with a state per method named.
    pub fn method<'a>(methods: impl IntoIterator<Item = &'a String>) -> Dimension {
        let mut states: Vec<State> = methods
            .into_iter()
            .map(|m| State {
                matcher: Some(Matcher::Method(m.clone())),
                witness: Witness::Value(m.clone()),
            })
            .collect();
        states.push(wildcard());
        Dimension {
            reads: "method".to_owned(),
            states,
        }
    }

    /// A dimension over the header `name`, with a state per value named, one for its
    /// absence, and the wildcard.
    pub fn header<'a>(name: &str, values: impl IntoIterator<Item = &'a String>) -> Dimension {
        let mut states: Vec<State> = values
            .into_iter()
            .filter(|v| !v.is_empty())
            .map(|v| State {
                matcher: Some(Matcher::Header(name.to_owned(), v.clone())),
                witness: Witness::Value(v.clone()),
            })
            .collect();
        states.push(State {
            matcher: Some(Matcher::Absent(name.to_owned())),
            witness: Witness::Absent,
        });
        states.push(wildcard());
        Dimension {
            reads: name.to_owned(),
            states,
        }
    }

    /// A dimension over a boolean header read as Java reads one: `true` (any case), or not.
    pub fn flag(name: &str) -> Dimension {
        Dimension {
            reads: name.to_owned(),
            states: vec![
                State {
                    matcher: Some(Matcher::HeaderTrue(name.to_owned())),
                    witness: Witness::Value("true".to_owned()),
                },
                wildcard(),
            ],
        }
    }
}

fn wildcard() -> State {
    State {
        matcher: None,
        witness: Witness::Other,
    }
}

/// One class: a state index per dimension.
pub type Class = Vec<usize>;

/// Every class of `dimensions`, in route order (see the module docs).
pub fn classes(dimensions: &[Dimension]) -> Vec<Class> {
    let mut all: Vec<Class> = vec![Vec::new()];
    for dimension in dimensions {
        all = all
            .into_iter()
            .flat_map(|class| {
                (0..dimension.states.len()).map(move |s| {
                    let mut next = class.clone();
                    next.push(s);
                    next
                })
            })
            .collect();
    }
    let wildcards = |class: &Class| {
        class
            .iter()
            .zip(dimensions)
            .filter(|(s, d)| d.states[**s].matcher.is_none())
            .count()
    };
    all.sort_by(|a, b| wildcards(a).cmp(&wildcards(b)).then_with(|| a.cmp(b)));
    all
}

/// How many classes `dimensions` make.
pub fn class_count(dimensions: &[Dimension]) -> usize {
    dimensions
        .iter()
        .map(|d| d.states.len())
        .fold(1usize, usize::saturating_mul)
}

/// Whether `general` matches every call `class` does: in each dimension the same state or
/// the wildcard.
fn generalises(dimensions: &[Dimension], general: &Class, class: &Class) -> bool {
    general
        .iter()
        .zip(class)
        .zip(dimensions)
        .all(|((g, c), d)| g == c || d.states[*g].matcher.is_none())
}

/// The indices of `routed` (classes in route order, each with where it routes) worth a
/// route: a class is left out when every later class generalising it routes alike.
pub fn needed<T: PartialEq>(dimensions: &[Dimension], routed: &[(Class, T)]) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    for i in (0..routed.len()).rev() {
        let (class, to) = &routed[i];
        let redundant = kept
            .iter()
            .filter(|&&j| generalises(dimensions, &routed[j].0, class))
            .all(|&j| routed[j].1 == *to)
            && kept
                .iter()
                .any(|&j| generalises(dimensions, &routed[j].0, class));
        if !redundant {
            kept.push(i);
        }
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The class a call falls into: per dimension, the first state whose matcher its
    /// value matches.
    fn class_of(dimensions: &[Dimension], values: &[Option<&str>]) -> Class {
        dimensions
            .iter()
            .zip(values)
            .map(|(d, v)| {
                d.states
                    .iter()
                    .position(|s| matches(s.matcher.as_ref(), *v))
                    .unwrap()
            })
            .collect()
    }

    fn matches(matcher: Option<&Matcher>, value: Option<&str>) -> bool {
        match matcher {
            None => true,
            Some(Matcher::Method(m)) | Some(Matcher::Header(_, m)) => value == Some(m),
            Some(Matcher::HeaderTrue(_)) => value.is_some_and(|v| v.eq_ignore_ascii_case("true")),
            Some(Matcher::Absent(_)) => value.is_none(),
        }
    }

    #[test]
    fn the_first_route_a_call_matches_is_its_class() {
        let methods = ["A".to_owned(), "B".to_owned()];
        let tags = ["gray".to_owned()];
        let dimensions = vec![
            Dimension::method(&methods),
            Dimension::header("dubbo.tag", &tags),
            Dimension::flag("dubbo.force.tag"),
        ];
        let order = classes(&dimensions);
        assert_eq!(order.len(), class_count(&dimensions));
        for method in [Some("A"), Some("B"), Some("C")] {
            for tag in [None, Some("gray"), Some("blue")] {
                for force in [None, Some("TRUE"), Some("false")] {
                    let values = [method, tag, force];
                    let first = order
                        .iter()
                        .find(|class| {
                            class
                                .iter()
                                .zip(&dimensions)
                                .zip(&values)
                                .all(|((s, d), v)| matches(d.states[*s].matcher.as_ref(), *v))
                        })
                        .unwrap();
                    assert_eq!(*first, class_of(&dimensions, &values), "{values:?}");
                }
            }
        }
    }

    #[test]
    fn a_class_routed_as_its_generalisations_needs_no_route() {
        let tags = ["gray".to_owned()];
        let dimensions = vec![Dimension::header("dubbo.tag", &tags)];
        let order = classes(&dimensions);
        // gray, absent, any other: absent and other route alike.
        let routed: Vec<(Class, &str)> = order
            .iter()
            .map(|c| (c.clone(), if c[0] == 0 { "C" } else { "AB" }))
            .collect();
        assert_eq!(needed(&dimensions, &routed), vec![0, 2]);
        // All alike: the wildcard alone.
        let same: Vec<(Class, &str)> = order.iter().map(|c| (c.clone(), "AB")).collect();
        assert_eq!(needed(&dimensions, &same), vec![2]);
    }
}
