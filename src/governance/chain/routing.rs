//! What the chain makes of one call input: the subsets a call may take, and why.

/// One subset a call may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Indices into the providers.
    pub indices: Vec<usize>,
    /// Its weight among the choices (1 unless a v3.1 rule split the chain).
    pub weight: u32,
}

/// Where calls of one input may go, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routing {
    /// The non-empty subsets a call may take; none when the call can go nowhere.
    pub choices: Vec<Choice>,
    /// How each step decided, in order: for `explain`, and the error of a call routed to
    /// none.
    pub steps: Vec<String>,
    /// Per provider, the step that routed it out (`None`: it may be called).
    pub routed_out: Vec<Option<String>>,
}

impl Routing {
    /// Whether a call of this input can go nowhere.
    pub fn is_empty(&self) -> bool {
        self.choices.is_empty()
    }

    /// Why a call of this input can go nowhere (the steps, joined).
    pub fn why(&self) -> String {
        self.steps.join("; ")
    }

    /// Whether provider `i` may be called (it is in some choice).
    pub fn reaches(&self, i: usize) -> bool {
        self.choices.iter().any(|c| c.indices.contains(&i))
    }
}
