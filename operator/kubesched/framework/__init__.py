"""The scheduling framework: pure types, plugin protocols and the runtime. No I/O."""
