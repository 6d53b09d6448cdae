"""Deprecated alias of :mod:`hostcore.testing` (0.1's conformance kit is now
:mod:`hostcore.testing.kit` and one module per kind)."""

from hostcore._moved import alias

alias(__name__, "hostcore.testing.kit", {
    "TelemetrySinkConformance": "hostcore.testing.sink.TelemetrySinkConformance",
    "sample_events": "hostcore.testing.sink.sample_events",
    "WorkerConformance": "hostcore.testing.worker.WorkerConformance",
    "PolicyInputConformance": "hostcore.testing.policy_input.PolicyInputConformance",
    "ODD_DIRECTORIES": "hostcore.testing.policy_input.ODD_DIRECTORIES",
    "ODD_SOURCES": "hostcore.testing.policy_input.ODD_SOURCES",
    "ProviderConformance": "hostcore.testing.provider.ProviderConformance",
    "FOREIGN_REF": "hostcore.testing.provider.FOREIGN_REF",
    "SourceConformance": "hostcore.testing.source.SourceConformance",
    "MAX_READS": "hostcore.testing.source.MAX_READS",
    "DestinationConformance": "hostcore.testing.destination.DestinationConformance",
    "KIT_ORIGIN": "hostcore.testing.destination.KIT_ORIGIN",
    "export_rows": "hostcore.testing.destination.export_rows",
})
