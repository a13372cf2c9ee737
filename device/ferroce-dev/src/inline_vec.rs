// SPDX-License-Identifier: GPL-2.0
//! A vector that keeps its first few elements inline.
//!
//! The data path builds small lists per WQE and per packet: a WQE's SGEs
//! and the guest physical segments they translate to are one or two
//! entries almost always. [`InlineVec`] holds up to `N` of them without a
//! heap allocation and moves to a `Vec` beyond that.

use core::ops::{Deref, DerefMut};

/// Up to `N` elements inline, more on the heap.
#[derive(Clone, Debug)]
pub enum InlineVec<T: Copy + Default, const N: usize> {
    /// The first `len` elements of `buf` are the vector's.
    Inline {
        /// Elements in use.
        len: usize,
        /// Storage.
        buf: [T; N],
    },
    /// More than `N` elements were pushed.
    Heap(Vec<T>),
}

impl<T: Copy + Default, const N: usize> InlineVec<T, N> {
    /// An empty vector.
    pub fn new() -> Self {
        Self::Inline {
            len: 0,
            buf: [T::default(); N],
        }
    }

    /// Appends `v`.
    pub fn push(&mut self, v: T) {
        match self {
            Self::Inline { len, buf } => {
                if let Some(slot) = buf.get_mut(*len) {
                    *slot = v;
                    *len += 1;
                } else {
                    let mut heap = Vec::with_capacity(N * 2);
                    heap.extend_from_slice(buf);
                    heap.push(v);
                    *self = Self::Heap(heap);
                }
            }
            Self::Heap(heap) => heap.push(v),
        }
    }

    /// Removes every element (a vector on the heap keeps its allocation).
    pub fn clear(&mut self) {
        match self {
            Self::Inline { len, .. } => *len = 0,
            Self::Heap(heap) => heap.clear(),
        }
    }
}

impl<T: Copy + Default, const N: usize> Default for InlineVec<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default, const N: usize> Deref for InlineVec<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Self::Inline { len, buf } => buf.get(..*len).unwrap_or(&[]),
            Self::Heap(heap) => heap,
        }
    }
}

impl<T: Copy + Default, const N: usize> DerefMut for InlineVec<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Self::Inline { len, buf } => buf.get_mut(..*len).unwrap_or(&mut []),
            Self::Heap(heap) => heap,
        }
    }
}

impl<T: Copy + Default, const N: usize> Extend<T> for InlineVec<T, N> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for v in iter {
            self.push(v);
        }
    }
}

impl<T: Copy + Default, const N: usize> FromIterator<T> for InlineVec<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = Self::new();
        v.extend(iter);
        v
    }
}

impl<T: Copy + Default, const N: usize> From<Vec<T>> for InlineVec<T, N> {
    fn from(v: Vec<T>) -> Self {
        if v.len() <= N {
            v.into_iter().collect()
        } else {
            Self::Heap(v)
        }
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for InlineVec<T, N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spills_to_the_heap_and_keeps_order() {
        let mut v: InlineVec<u32, 2> = InlineVec::new();
        assert!(v.is_empty());
        v.push(1);
        v.push(2);
        assert!(matches!(v, InlineVec::Inline { len: 2, .. }));
        v.push(3);
        assert!(matches!(v, InlineVec::Heap(_)));
        assert_eq!(&*v, &[1, 2, 3]);
        v[0] = 7;
        assert_eq!(v.iter().copied().collect::<Vec<_>>(), vec![7, 2, 3]);
        v.clear();
        assert!(v.is_empty());
        let w: InlineVec<u32, 2> = vec![4, 5].into();
        assert!(matches!(w, InlineVec::Inline { len: 2, .. }));
        assert_eq!(
            InlineVec::<u32, 2>::from(vec![1, 2, 3]),
            [1, 2, 3].into_iter().collect()
        );
    }
}
