"""Which wheel a variant-aware installer picks on a machine whose GPU is argv[2] (`90`,
`121`), as NVIDIA's provider describes that GPU, by
variantlib's resolution (the reference implementation of PEP 825's ordering) over the
index-level `{name}-{version}-variants.json` argv[1]: the variant label, or `fat` where no
variant fits (the installer then takes the non-variant wheel)."""
import json, pathlib, sys

from variantlib.models.variant import VariantProperty
from variantlib.resolver.lib import sort_and_filter_supported_variants
from variantlib.variants_json import VariantsJson

vj = VariantsJson(json.loads(pathlib.Path(sys.argv[1]).read_text()))
# What NVIDIA's variant provider (nvidia-variant-provider's plugin.py) says a GPU of
# capability M.m supports: M{m'}_real for every m' <= m of its major version, and M0_virtual.
major, minor = int(sys.argv[2][:-1]), int(sys.argv[2][-1])
machine = [VariantProperty("nvidia", "sm_arch", f"{major}{m}_real") for m in range(minor, -1, -1)]
machine.append(VariantProperty("nvidia", "sm_arch", f"{major}0_virtual"))
ranked = [
    v for v in sort_and_filter_supported_variants(
        list(vj.variants.values()), machine, namespace_priorities=vj.namespace_priorities)
    if not v.is_null_variant()
]
print(ranked[0].label if ranked else "fat")
