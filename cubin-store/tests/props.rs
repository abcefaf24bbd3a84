//! Property tests: random stores round-trip; random damage never panics.
mod common;

use common::*;
use cubin_store::*;
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = EntryKind> {
    prop_oneof![
        Just(EntryKind::Sass),
        Just(EntryKind::Ptx),
        any::<u16>().prop_map(EntryKind::Other)
    ]
}

fn variant() -> impl Strategy<Value = ArchVariant> {
    prop_oneof![
        Just(ArchVariant::Plain),
        Just(ArchVariant::Specific),
        Just(ArchVariant::Family)
    ]
}

/// Raw contents drawn from a small pool so dedup gets exercised, plus random bytes.
fn raw() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u32..4).prop_map(|s| fake_cubin(s, 1500)),
        (0u32..1000, 0usize..6000).prop_map(|(s, l)| fake_cubin(s, l)),
        proptest::collection::vec(any::<u8>(), 0..300),
    ]
}

fn entry() -> impl Strategy<Value = (EntryMeta, Vec<u8>)> {
    (
        kind(),
        0u32..200,
        variant(),
        proptest::collection::vec(any::<u8>(), 0..40),
        raw(),
    )
        .prop_map(|(kind, arch, variant, attrs, raw)| {
            (
                EntryMeta {
                    id: cubin_store::EntryId::new(kind, arch, variant),
                    attrs,
                },
                raw,
            )
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    proptest::collection::vec(proptest::collection::vec(entry(), 0..6), 0..5).prop_map(|mods| {
        mods.into_iter()
            .enumerate()
            .map(|(i, e)| (format!("module-{i}-ü"), e))
            .collect()
    })
}

fn dictionary() -> Vec<u8> {
    let samples: Vec<Vec<u8>> = (0..40).map(|i| fake_cubin(500 + i, 1500)).collect();
    let refs: Vec<&[u8]> = samples.iter().map(|s| s.as_slice()).collect();
    train_dictionary(&refs, 2048).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(spec in spec(), level in prop_oneof![Just(-5), Just(1), Just(3), Just(9), Just(19)], use_dict: bool) {
        let dictionary = use_dict.then(dictionary);
        let (bytes, summary) = build_with(&spec, WriteOptions { level, dictionary: dictionary.clone(), ..Default::default() });
        let store = Store::parse(&bytes).unwrap();
        prop_assert_eq!(store.digest(), summary.digest);
        prop_assert_eq!(store.dictionary().map(<[u8]>::to_vec), dictionary);
        check_matches(&store, &spec);
        let distinct: std::collections::HashSet<&Vec<u8>> = spec.iter().flat_map(|m| &m.1).map(|e| &e.1).collect();
        prop_assert_eq!(summary.blobs, distinct.len());
        // Deterministic.
        let (again, _) = build_with(&spec, WriteOptions { level, dictionary: store.dictionary().map(<[u8]>::to_vec), ..Default::default() });
        prop_assert_eq!(bytes, again);
    }

    #[test]
    fn mutation_never_panics(
        spec in spec(),
        muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        reseal: bool,
        cut in any::<prop::sample::Index>(),
        do_cut: bool,
    ) {
        let mut bytes = build(&spec);
        for (at, v) in muts {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        if reseal {
            cubin_store::testing::reseal(&mut bytes);
        }
        if do_cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Ok(store) = Store::parse(&bytes) {
            let _ = store.stats();
            for m in store.modules() {
                let _ = store.module_by_name(m.name());
                for e in m.entries() {
                    let _ = (e.meta(), e.arch_name(), e.is_shared());
                    let _ = store.read_entry(&e);
                }
            }
            let _ = store.verify();
        }
    }
}
