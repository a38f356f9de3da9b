mla-prefill-conformance --plugin '${MLA_PLUGIN_DIR}/libmla_example_plugin.so' --gtest_brief=1  # yours: its path
