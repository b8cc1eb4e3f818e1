"""Type stubs for the private C extension birsim._birsim (use the birsim package)."""

from typing import Any, Callable, Dict, List, Optional, Tuple

#: name -> (code, simulator class letter K/B/N/L/E, family)
opcodes: Dict[str, Tuple[int, str, str]]
#: name -> (code, itemsize, kind letter U/S/F/R/P, lanes)
dtypes: Dict[str, Tuple[int, int, str, int]]
alu_ops: Dict[str, int]
act_funcs: Dict[str, int]
#: group -> {name: value}, from bs_enums.def
enums: Dict[str, Dict[str, int]]
#: name -> (level, sbuf partitions, sbuf bytes/partition, psum partitions, psum bytes/partition)
arches: Dict[str, Tuple[int, int, int, int, int]]
statuses: Dict[str, int]
expr_ops: Dict[str, int]
limits: Dict[str, int]
#: table -> {"itemsize": int, "fields": [(name, offset, "I32"|"I64"|"F64", count)]}
layouts: Dict[str, Dict[str, Any]]

def _fail_alloc_after(n: int) -> None: ...

class Program:
    def __init__(self, tables: Dict[str, bytes]) -> None: ...

HostKernel = Callable[[str, str, str, int, List[Tuple[memoryview, int, Tuple[int, ...]]],
                       List[Tuple[int, Tuple[int, ...]]], int], Any]

class Sim:
    def __init__(self, program: Program, cores: int = 1, schedule: int = 0, seed: int = 0,
                 max_steps: int = 0, strict: bool = False) -> None: ...
    def reset(self) -> None: ...
    def write(self, loc: int, core: int, data: bytes, rows: int, rowbytes: int) -> None: ...
    def read(self, loc: int, core: int, rows: int, rowbytes: int) -> Tuple[bytearray, bool]: ...
    def run(self, host: Optional[HostKernel], slice: int = 200000) -> None: ...
    def stats(self) -> Tuple[List[int], List[int], int]: ...
    def diagnostics(self) -> Tuple[List[str], int, str, bool]: ...
    def reg(self, core: int, reg: int) -> int: ...
