"""The rule engine: rules and the facts they read, rule packs and their compiled form,
declarative conditions, site policy, rule selection, rule cases and generated docs."""
