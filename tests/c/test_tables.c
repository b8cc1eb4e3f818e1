/* tests/c/test_tables.c -- table consistency (house style G18.3): every .def list has
** unique names and coherent properties, and each kernel in kernels.def belongs to a
** K-class opcode. Build: make -C tests/c */
#include <stdio.h>
#include <string.h>
#include "kernels/kernel.h"

static int passed, failed;
#define CHECK(c) do { if (c) passed++; else { failed++; printf("  FAIL line %d: %s\n", __LINE__, #c); } } while (0)

static int unique(const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[i], names[j]) == 0)
                return 0;
    return 1;
}

int main(void)
{
    const char *names[BS_OP__COUNT];
    const char *dts[BS_DT__COUNT];
    const char *alus[BS_ALU__COUNT];
    static const int kernel_ops[] = {
#define BS_KERNEL(name) BS_OP_##name,
#include "kernels/kernels.def"
#undef BS_KERNEL
    };
    CHECK(BS_OP__COUNT == 110);
    for (int i = 0; i < BS_OP__COUNT; i++)
        names[i] = bs_opinfo_table[i].name;
    CHECK(unique(names, BS_OP__COUNT));
    for (int i = 0; i < BS_DT__COUNT; i++)
        dts[i] = bs_dtinfo_table[i].name;
    CHECK(BS_DT__COUNT == 20 && unique(dts, BS_DT__COUNT));
    for (int i = 0; i < BS_ALU__COUNT; i++)
        alus[i] = bs_alu_table[i].name;
    CHECK(BS_ALU__COUNT == 33 && unique(alus, BS_ALU__COUNT));
    CHECK(BS_ACT__COUNT == 31 && unique(bs_act_names, BS_ACT__COUNT));
    /* abstract opcodes are exactly the six bases */
    {
        int n = 0;
        for (int i = 0; i < BS_OP__COUNT; i++)
            n += bs_opinfo_table[i].family == BS_FAM_abstract;
        CHECK(n == 6);
    }
    /* every kernel belongs to a K-class opcode, and its table entry is that kernel */
    for (size_t k = 0; k < sizeof kernel_ops / sizeof kernel_ops[0]; k++) {
        CHECK(bs_opinfo_table[kernel_ops[k]].sim == BS_SIM_K);
        CHECK(bs_kernel_for(kernel_ops[k]) != NULL);
    }
    /* loops are L, terminators are family term, B-class are abstract or stub */
    CHECK(bs_opinfo_table[BS_OP_Loop].sim == BS_SIM_L && bs_opinfo_table[BS_OP_DoWhile].sim == BS_SIM_L);
    for (int i = 0; i < BS_OP__COUNT; i++)
        if (bs_opinfo_table[i].sim == BS_SIM_B)
            CHECK(bs_opinfo_table[i].family == BS_FAM_abstract || bs_opinfo_table[i].family == BS_FAM_stub);
    /* the size table of machine-model.md §4.1 */
    {
        static const int sizes[] = {1,1,2,1,1,1,1,1,4,4,2,2,2,2,4,4,4,4,8,8};
        for (int i = 0; i < BS_DT__COUNT; i++)
            CHECK(bs_dtinfo_table[i].size == sizes[i]);
    }
    CHECK(strcmp(bs_enum_name("ENGINE", 3), "PE") == 0 && strcmp(bs_enum_name("CMP", 11), "IS_GTREG") == 0);
    CHECK(bs_arch_find(30) != NULL && bs_arch_find(30)->sbuf_bpp == 229376);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
