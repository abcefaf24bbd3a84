"""Which wheel a variant-aware installer picks on a machine whose GPU is argv[2] (`90`), by
variantlib's resolution (the reference implementation of PEP 825's ordering) over the
index-level `{name}-{version}-variants.json` argv[1]: the variant label, or `fat` where no
variant fits (the installer then takes the non-variant wheel)."""
import json, pathlib, sys

from variantlib.models.variant import VariantProperty
from variantlib.resolver.lib import sort_and_filter_supported_variants
from variantlib.variants_json import VariantsJson

vj = VariantsJson(json.loads(pathlib.Path(sys.argv[1]).read_text()))
machine = [VariantProperty("nvidia", "sm_arch", f"{sys.argv[2]}_real")]
ranked = [
    v for v in sort_and_filter_supported_variants(
        list(vj.variants.values()), machine, namespace_priorities=vj.namespace_priorities)
    if not v.is_null_variant()
]
print(ranked[0].label if ranked else "fat")
