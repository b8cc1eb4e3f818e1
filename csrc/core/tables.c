/* core/tables.c -- the descriptive tables, each generated from its .def list. */
#include "common.h"

const bs_opinfo bs_opinfo_table[BS_OP__COUNT] = {
#define BS_K(stem) #stem
#define BS_VM(what) "vm"
#define BS_TODO "todo"
#define BS_OP(name, sim, fam, handler, sem) \
    [BS_OP_##name] = { #name, BS_SIM_##sim, BS_FAM_##fam, handler, sem },
#include "../bs_ops.def"
#undef BS_K
#undef BS_VM
#undef BS_TODO
};

const char *const bs_family_names[BS_FAM__COUNT] = {
#define BS_FAM_NAME(f) [BS_FAM_##f] = #f,
    BS_FAMILIES(BS_FAM_NAME)
#undef BS_FAM_NAME
};

const bs_dtinfo bs_dtinfo_table[BS_DT__COUNT] = {
#define BS_DT(name, bytes, kind, lanes) [BS_DT_##name] = { #name, bytes, BS_DK_##kind, lanes },
#include "../bs_dtypes.def"
#undef BS_DT
};

const bs_aluinfo bs_alu_table[BS_ALU__COUNT] = {
#define BS_ALU(name, cls) [BS_ALU_##name] = { #name, BS_ALUC_##cls },
#include "../bs_alu.def"
#undef BS_ALU
};

const char *const bs_act_names[BS_ACT__COUNT] = {
#define BS_ACT(name) [BS_ACT_##name] = #name,
#include "../bs_act.def"
#undef BS_ACT
};

const bs_archinfo bs_arch_table[BS_ARCHI__COUNT] = {
#define BS_ARCH(name, level, sp, sb, pp, pb) [BS_ARCHI_##name] = { #name, level, sp, sb, pp, pb },
#include "../bs_arch.def"
#undef BS_ARCH
};

const bs_archinfo *bs_arch_find(int32_t level)
{
    for (size_t i = 0; i < BS_ARCHI__COUNT; i++)
        if (bs_arch_table[i].level == level)
            return &bs_arch_table[i];
    return NULL;
}

const bs_enuminfo bs_enum_table[] = {
#define BS_EV(group, name, value) { #group, #name, value },
#include "../bs_enums.def"
#undef BS_EV
    { NULL, NULL, 0 }
};

const char *bs_enum_name(const char *group, int64_t value)
{
    for (const bs_enuminfo *e = bs_enum_table; e->group; e++)
        if (e->value == value && strcmp(e->group, group) == 0)
            return e->name;
    return "?";
}

int64_t bs_enum_end(const char *group)
{
    int64_t end = 0;
    for (const bs_enuminfo *e = bs_enum_table; e->group; e++)
        if (e->value >= end && e->group[0] == group[0] && strcmp(e->group, group) == 0)
            end = e->value + 1;
    return end;
}
