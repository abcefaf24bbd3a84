//! Fixed-size little-endian records, declared once: [`wire_layout!`] makes the struct, its
//! field offsets, and the reader and writer from one table, so they cannot disagree. Every
//! record of every format fatpack defines (fatbin container and entry headers, the fatbin
//! wrapper, the stub, the store slot, the split manifest and pack headers, the store
//! header) is declared through it.

/// A field type of a wire record: an integer (little-endian) or a byte array.
pub trait Wire: Sized + Copy {
    /// Bytes the field takes.
    const LEN: usize;
    /// Reads the field from exactly [`Wire::LEN`] bytes.
    fn get(b: &[u8]) -> Option<Self>;
    /// Writes the field into exactly [`Wire::LEN`] bytes.
    fn put(&self, b: &mut [u8]);
}

macro_rules! wire_int {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            const LEN: usize = core::mem::size_of::<$t>();
            fn get(b: &[u8]) -> Option<Self> {
                Some(<$t>::from_le_bytes(b.try_into().ok()?))
            }
            fn put(&self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
wire_int!(u8, u16, u32, u64, i64);

impl<const N: usize> Wire for [u8; N] {
    const LEN: usize = N;
    fn get(b: &[u8]) -> Option<Self> {
        b.try_into().ok()
    }
    fn put(&self, b: &mut [u8]) {
        b.copy_from_slice(self);
    }
}

/// Declares a fixed-size little-endian record: `pub struct Name (LEN) { field: type = offset, }`.
/// Bytes no field covers are written as zeros and ignored when read.
#[macro_export]
macro_rules! wire_layout {
    (
        $(#[$meta:meta])*
        pub struct $name:ident ($len:expr) {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $off:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// Bytes the fixed record takes.
            pub const LEN: usize = $len;

            /// Reads the record from the start of `b`; `None` if `b` is shorter.
            pub fn read(b: &[u8]) -> Option<Self> {
                // A fixed-size array: every field's range is checked at compile time.
                let b: &[u8; $len] = b.get(..Self::LEN)?.try_into().ok()?;
                Some($name {
                    $( $field: <$ty as $crate::wire::Wire>::get(
                        &b[$off..$off + <$ty as $crate::wire::Wire>::LEN],
                    )?, )*
                })
            }

            /// The record as bytes.
            pub fn to_bytes(&self) -> [u8; $len] {
                let mut b = [0u8; $len];
                $( $crate::wire::Wire::put(
                    &self.$field,
                    &mut b[$off..$off + <$ty as $crate::wire::Wire>::LEN],
                ); )*
                b
            }
        }
    };
}
