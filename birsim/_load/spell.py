"""The loader's spellings: the names and aliases of the BIR-JSON contract that every pass
reads (docs/spec/BIR-JSON.md). A leaf: it imports only the extension's alias table."""

from .._birsim import arch_aliases as _arch_aliases

__all__ = ["ENGINE_ALIASES", "ARCH_ALIASES", "OPCODE_KEYS", "INPUT_KINDS", "OUTPUT_KINDS",
           "NO_DATA_MEMORY", "MUST_ALIAS", "REGISTER_DTYPES", "LOOP_OPS", "TERMINATORS",
           "PSUM_BANK_BYTES", "STRICT_SUFFIX", "OPCODE_ALIASES", "DMA_BLOCK_OPS"]

#: Alternative engine spellings (docs/spec/BIR-JSON.md, Instructions).
ENGINE_ALIASES = {
    "GPSIMD": "Pool", "gpsimd": "Pool", "pool": "Pool",
    "Scalar": "Activation", "act": "Activation", "ACT": "Activation",
    "Tensor": "PE", "pe": "PE",
    "SyncDMA": "DMA", "dma": "DMA",
    "Vector": "DVE", "dve": "DVE",
    "Sync": "SP", "sp": "SP",
    "All": "ALL",
}
#: Alternative architecture names (docs/spec/BIR-JSON.md, Module).
ARCH_ALIASES = dict(_arch_aliases)       # the BS_ARCH_ALIAS rows of csrc/bs_arch.def
#: Keys naming an instruction's opcode, in order of preference.
OPCODE_KEYS = ("opcode", "type", "instruction_type")

INPUT_KINDS = ("ExternalInput", "ExternalInputParameter", "Input")
OUTPUT_KINDS = ("ExternalOutput", "ExternalOutputParameter", "Output")
NO_DATA_MEMORY = ("Unallocated", "Input", "Output", "RNGSTATE")
#: The suffix of an input that is one buffer with the output named without it.
MUST_ALIAS = ".must_alias_input"
REGISTER_DTYPES = ("int32", "uint32", "float32", "int64", "uint64")
LOOP_OPS = ("Loop", "DynamicForLoop", "DoWhile")
TERMINATORS = ("CompareAndBranch", "UnconditionalBranch", "Break", "Return", "Exit")
#: PSUM bank size (docs/spec/BIR-JSON.md, Memory location: 2 KiB on every arch birsim models).
PSUM_BANK_BYTES = 2048
#: Appended to a load warning raised as a ProgramError under strict.
STRICT_SUFFIX = " (a load warning: an error under strict=True)"
#: Opcode names of newer compilers that are other names of known opcodes.
OPCODE_ALIASES = {"Max8": "Max", "MaxIndex8": "MaxIndex", "MatchReplace8": "MatchReplace"}
DMA_BLOCK_OPS = ("DMACopy", "DMADescriptorCopy", "DMADescriptorCCE",
                 "DMADescriptorTranspose", "DMADescriptorReplicate")
