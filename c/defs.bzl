"""Compile options shared by every C target of ferrite."""

# -ffp-contract=off: no silent a*b+c fusion, so each ISA level performs exactly the IEEE operations
# the source names and results stay bit-identical across levels and compilers.
FER_COPTS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wpedantic",
    "-Wno-overlength-strings",
    "-ffp-contract=off",
    "-fPIC",
    "-Iffi",
    "-Ic",
]

FER_TEST_COPTS = FER_COPTS
