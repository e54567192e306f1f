//! The macros that write the options types' plain setters and readers, and the builders'
//! setters that forward to them: one shape, written once for every options type.

/// Writes, for each listed field of an options type, its builder-style setter and its
/// reader, inside the type's `impl` block:
///
/// ```text
/// /// Sets … (default …).
/// setter / reader => field: Type, |value| normalised value;
/// ```
///
/// The setter takes a `Type` and stores it (normalised by the closure-like expression, when
/// one is given: a floor, a clamp); the reader returns what is stored, so that users can
/// read the defaults. Setters that do more than store one value are written by hand.
macro_rules! option_accessors {
    ($(
        $(#[$doc:meta])*
        $set:ident / $get:ident => $field:ident: $ty:ty $(, |$value:ident| $fix:expr)?;
    )*) => {$(
        $(#[$doc])*
        pub fn $set(mut self, value: $ty) -> Self {
            $(let $value = value; let value = $fix;)?
            self.$field = value;
            self
        }

        #[doc = concat!(
            "What [`", stringify!($set), "`](Self::", stringify!($set),
            ") set, else the default: the value in effect."
        )]
        pub fn $get(&self) -> $ty {
            self.$field
        }
    )*};
}

/// Writes a builder's setters that change one part of the options it holds in its field
/// `$options`: each calls the options type's setter of the same name.
macro_rules! forward_options {
    ($options:ident { $($(#[$doc:meta])* $set:ident: $ty:ty;)* }) => {$(
        $(#[$doc])*
        pub fn $set(mut self, value: $ty) -> Self {
            self.$options = self.$options.$set(value);
            self
        }
    )*};
}

pub(crate) use forward_options;
pub(crate) use option_accessors;
