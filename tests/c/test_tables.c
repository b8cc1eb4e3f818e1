/* tests/c/test_tables.c -- table consistency (house style G18.3): every .def list has
** unique names and coherent properties; every K-class opcode has a handler (a kernel,
** the VM, or an explicit `todo`) and every other opcode is handled by the VM; parameter
** slots are unique per opcode. Build: make -C tests/c */
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
    CHECK(BS_OP__COUNT == 113);       /* 110 of 2.24 + TopK, LocalGather, Nonzero */
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
    /* handlers: only K-class opcodes have kernels; a kernel exactly when not vm/todo */
    for (int i = 0; i < BS_OP__COUNT; i++) {
        const char *h = bs_opinfo_table[i].handler;
        int special = strcmp(h, "vm") == 0 || strcmp(h, "todo") == 0;
        CHECK(h[0] != '\0');
        CHECK(special == (bs_kernel_for(i) == NULL));
        CHECK(bs_opinfo_table[i].sim == BS_SIM_K || strcmp(h, "vm") == 0);
    }
    /* parameter slots: no two fields of an opcode share a slot or a name */
    for (int a = 0; a < bs_param_count; a++)
        for (int b = a + 1; b < bs_param_count; b++) {
            const bs_paraminfo *x = &bs_param_table[a], *y = &bs_param_table[b];
            if (x->op != y->op)
                continue;
            CHECK(!(x->slot == y->slot && x->index == y->index));
            CHECK(strcmp(x->field, y->field) != 0);
        }
    /* loops are L, terminators are family term, B-class are abstract or stub */
    CHECK(bs_opinfo_table[BS_OP_Loop].sim == BS_SIM_L && bs_opinfo_table[BS_OP_DoWhile].sim == BS_SIM_L);
    for (int i = 0; i < BS_OP__COUNT; i++)
        if (bs_opinfo_table[i].sim == BS_SIM_B)
            CHECK(bs_opinfo_table[i].family == BS_FAM_abstract || bs_opinfo_table[i].family == BS_FAM_stub);
    /* the size table of docs/spec/machine-model.md §4.1 */
    {
        static const int sizes[] = {1,1,2,1,1,1,1,1,4,4,2,2,2,2,4,4,4,4,8,8};
        for (int i = 0; i < BS_DT__COUNT; i++)
            CHECK(bs_dtinfo_table[i].size == sizes[i]);
    }
    CHECK(strcmp(bs_enum_name("ENGINE", 3), "PE") == 0 && strcmp(bs_enum_name("CMP", 11), "IS_GTREG") == 0);
    CHECK(bs_arch_find(30) != NULL && bs_arch_find(30)->sbuf_bpp == 229376);
    /* group sizes come from bs_enums.def (the verifier's ranges; the CMP register forms
    ** follow the six immediate ones, which vm/branch.c relies on) */
    CHECK(bs_enum_end("CMP") == 12 && bs_enum_end("WAIT") == 3 && bs_enum_end("UPDATE") == 6);
    CHECK(bs_enum_end("ENGINE") == BS_NUM_ENGINES && bs_enum_end("no such group") == 0);
    CHECK(BS_CMP_IS_LTREG == 6 && BS_CMP_IS_GTREG - BS_CMP_IS_LTREG == BS_CMP_IS_GTIMM - BS_CMP_IS_LTIMM);
    /* class letters: letter i of each list names value i */
    CHECK(strcmp(BS_LETTERS(BS_SIM_CLASSES), "KBNLE") == 0 && BS_SIM_E == 4);
    CHECK(strcmp(BS_LETTERS(BS_DT_KINDS), "USFRP") == 0 && BS_DK_P == 4);
    CHECK(strcmp(BS_LETTERS(BS_ALU_CLASSES), "ABCUX") == 0 && BS_ALUC_X == 4);
    /* every opcode has one line of semantics or an explicit "" (the docs column) */
    for (int i = 0; i < BS_OP__COUNT; i++)
        CHECK(bs_opinfo_table[i].semantics != NULL);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
