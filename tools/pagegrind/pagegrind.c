/* pagegrind: a Valgrind tool that counts data reads and writes per 4 KiB page in
   windows of N data accesses and writes them in the pagegrind (.pg) format.

   Output (little-endian), one block per window ("epoch"):
     u64 magic 0x5047454D50524731, u64 epoch, u64 nrec, u64 accesses
     nrec x { u64 vpn, u32 reads, u32 writes }     (sorted by vpn)

   Fast path, inlined as VEX IR before every load and store:
     key  = (addr >> 12) | gen_key             gen_key changes every window
     slot = &cache[(addr >> 12) & CACHE_MASK]  direct-mapped {key, entry*}
     if (slot->key != key) pg_miss(addr)       guarded dirty call
     slot->entry->reads (or ->writes) += 1
     if (--left == 0) pg_window_end()          guarded dirty call
   pg_miss finds or inserts the page in the window's hash table and fills the slot.
   Entries live in fixed chunks, so slot pointers stay valid while the table grows;
   a new window bumps gen_key, which invalidates every slot at once.

   An access that straddles a page boundary is counted on its first page. Guarded
   loads/stores, CAS (one read and one write), LL/SC and dirty helpers' memory
   effects take a C helper. Each window is written when it ends (a killed run leaves
   whole epochs); the last, partial one at exit or before an execve. A forked child
   records nothing. Counts are 64-bit while counting and saturate at 2^32 - 1 in the
   file. */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"

#define PG_MAGIC      0x5047454D50524731ULL
#define PAGE_SHIFT    12
#define GEN_SHIFT     46               /* vpn < 2^45 even with 5-level paging */
#define GEN_MAX       ((1ULL << (64 - GEN_SHIFT)) - 1)
#ifndef CACHE_BITS
#define CACHE_BITS    16               /* 64K slots x 16 bytes: 1 MiB */
#endif
#define CACHE_SIZE    (1UL << CACHE_BITS)
#define CACHE_MASK    (CACHE_SIZE - 1)
#define CHUNK_BITS    14
#define CHUNK_SIZE    (1UL << CHUNK_BITS)
#define OUTBUF_SIZE   (1 << 20)

typedef struct {
   ULong vpn;
   ULong reads;
   ULong writes;
} Entry;

typedef struct {
   ULong  key;
   Entry* ent;
} Slot;

typedef struct {
   ULong vpn;
   UInt  reads;
   UInt  writes;
} Record;

/* Options. */
static Long         clo_window = 10000000;
static const HChar* clo_out = "pagegrind.out.%p";

/* State touched by the inlined fast path. */
static Slot  cache[CACHE_SIZE] __attribute__((aligned(64)));
static ULong gen_key;
static ULong left;

/* The current window: entries in chunks, hash table of entry index + 1. */
static Entry** chunks;
static UWord   nchunks;
static UWord   nentries;
static UInt*   table;
static UWord   table_bits;
static ULong   gen = 1;
static ULong   epoch;

static Int    out_fd = -1;
static HChar* out_name;
static UChar* outbuf;
static UWord  outlen;
static Bool   disabled;
static Record* recs;
static UWord   recs_cap;

static inline Entry* entry_at(UWord i)
{
   return &chunks[i >> CHUNK_BITS][i & (CHUNK_SIZE - 1)];
}

static inline UWord hash_vpn(ULong vpn)
{
   return (UWord)((vpn * 0x9E3779B97F4A7C15ULL) >> (64 - table_bits));
}

static void table_alloc(UWord bits)
{
   table_bits = bits;
   table = VG_(calloc)("pg.table", 1UL << bits, sizeof(UInt));
}

static void table_grow(void)
{
   UWord i, mask;
   VG_(free)(table);
   table_alloc(table_bits + 1);
   mask = (1UL << table_bits) - 1;
   for (i = 0; i < nentries; i++) {
      UWord h = hash_vpn(entry_at(i)->vpn);
      while (table[h])
         h = (h + 1) & mask;
      table[h] = (UInt)(i + 1);
   }
}

static Entry* lookup(ULong vpn)
{
   UWord mask = (1UL << table_bits) - 1;
   UWord h = hash_vpn(vpn);
   Entry* e;
   for (;;) {
      UInt ix = table[h];
      if (ix == 0)
         break;
      e = entry_at(ix - 1);
      if (e->vpn == vpn)
         return e;
      h = (h + 1) & mask;
   }
   if ((nentries >> CHUNK_BITS) >= nchunks) {
      chunks = VG_(realloc)("pg.chunks", chunks, (nchunks + 1) * sizeof(Entry*));
      chunks[nchunks++] = VG_(malloc)("pg.chunk", CHUNK_SIZE * sizeof(Entry));
   }
   tl_assert(nentries < 0xFFFFFFFFUL);
   table[h] = (UInt)(nentries + 1);
   e = entry_at(nentries++);
   e->vpn = vpn;
   e->reads = 0;
   e->writes = 0;
   if (2 * nentries > (1UL << table_bits))
      table_grow();
   return e;
}

/* Empty the hash table: slot by slot when the window touched few pages. */
static void table_clear(void)
{
   UWord i, mask = (1UL << table_bits) - 1;
   if (nentries * 16 >= (1UL << table_bits)) {
      VG_(memset)(table, 0, (1UL << table_bits) * sizeof(UInt));
      return;
   }
   for (i = 0; i < nentries; i++) {
      UWord h = hash_vpn(entry_at(i)->vpn);
      while (table[h] != i + 1)
         h = (h + 1) & mask;
      table[h] = 0;
   }
}

static void out_write(const void* p, UWord n)
{
   const UChar* s = p;
   while (n > 0) {
      UWord k = OUTBUF_SIZE - outlen;
      if (k > n)
         k = n;
      VG_(memcpy)(outbuf + outlen, s, k);
      outlen += k;
      s += k;
      n -= k;
      if (outlen == OUTBUF_SIZE) {
         Int w = VG_(write)(out_fd, outbuf, outlen);
         if (w != (Int)outlen) {
            VG_(umsg)("pagegrind: error writing %s; recording stopped\n", out_name);
            disabled = True;
         }
         outlen = 0;
      }
   }
}

static void out_flush(void)
{
   if (outlen > 0 && !disabled) {
      Int w = VG_(write)(out_fd, outbuf, outlen);
      if (w != (Int)outlen) {
         VG_(umsg)("pagegrind: error writing %s\n", out_name);
         disabled = True;
      }
   }
   outlen = 0;
}

static Int cmp_rec(const void* a, const void* b)
{
   ULong x = ((const Record*)a)->vpn, y = ((const Record*)b)->vpn;
   return x < y ? -1 : x > y ? 1 : 0;
}

static inline UInt sat32(ULong v)
{
   return v > 0xFFFFFFFFULL ? 0xFFFFFFFFU : (UInt)v;
}

/* Write the current window as one epoch and start a new one. */
static void dump_window(ULong accesses)
{
   UWord i;
   ULong hdr[4];
   if (!disabled) {
      if (nentries > recs_cap) {
         recs_cap = nentries + nentries / 2;
         recs = VG_(realloc)("pg.recs", recs, recs_cap * sizeof(Record));
      }
      for (i = 0; i < nentries; i++) {
         const Entry* e = entry_at(i);
         recs[i].vpn = e->vpn;
         recs[i].reads = sat32(e->reads);
         recs[i].writes = sat32(e->writes);
      }
      VG_(ssort)(recs, nentries, sizeof(Record), cmp_rec);
      hdr[0] = PG_MAGIC;
      hdr[1] = epoch;
      hdr[2] = nentries;
      hdr[3] = accesses;
      out_write(hdr, sizeof hdr);
      out_write(recs, nentries * sizeof(Record));
      out_flush();
   }
   epoch++;
   table_clear();
   nentries = 0;
   if (++gen > GEN_MAX) {
      VG_(memset)(cache, 0, sizeof cache);
      gen = 1;
   }
   gen_key = gen << GEN_SHIFT;
   left = (ULong)clo_window;
}

/* Fast-path miss: find the page's entry and put it in its cache slot. */
static VG_REGPARM(1) void pg_miss(Addr a)
{
   ULong vpn = (ULong)a >> PAGE_SHIFT;
   Slot* s = &cache[vpn & CACHE_MASK];
   s->ent = lookup(vpn);
   /* Pages above 2^GEN_SHIFT (the vsyscall page) would alias the generation bits:
      such a slot serves this access only (no key has the value 0). */
   s->key = (vpn >> GEN_SHIFT) ? 0 : (vpn | gen_key);
}

static VG_REGPARM(0) void pg_window_end(void)
{
   dump_window((ULong)clo_window);
}

/* Slow path: one whole access (guarded loads/stores, CAS, LL/SC, dirty helpers). */
static VG_REGPARM(2) void pg_access(Addr a, UWord is_write)
{
   Entry* e = lookup((ULong)a >> PAGE_SHIFT);
   if (is_write)
      e->writes++;
   else
      e->reads++;
   if (--left == 0)
      dump_window((ULong)clo_window);
}

static IRExpr* mk_u64(ULong v)
{
   return IRExpr_Const(IRConst_U64(v));
}

static IRExpr* tmp_of(IRSB* sb, IRType ty, IRExpr* e)
{
   IRTemp t = newIRTemp(sb->tyenv, ty);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, e));
   return IRExpr_RdTmp(t);
}

static IRExpr* addr64(IRSB* sb, IRExpr* addr)
{
   IRType ty = typeOfIRExpr(sb->tyenv, addr);
   if (ty == Ity_I32)
      return tmp_of(sb, Ity_I64, IRExpr_Unop(Iop_32Uto64, addr));
   tl_assert(ty == Ity_I64);
   return addr;
}

/* The inlined fast path for one unconditional access. */
static void add_fast(IRSB* sb, IRExpr* addr, Bool is_write)
{
   IRExpr *a, *vpn, *gk, *key, *slot, *skey, *miss, *ep, *cp, *cnt, *n, *n1, *end;
   IRDirty* d;

   a = addr64(sb, addr);
   vpn = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, a, IRExpr_Const(IRConst_U8(PAGE_SHIFT))));
   gk = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, mk_u64((ULong)(Addr)&gen_key)));
   key = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Or64, vpn, gk));
   slot = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_And64, vpn, mk_u64(CACHE_MASK)));
   slot = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shl64, slot, IRExpr_Const(IRConst_U8(4))));
   slot = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, slot, mk_u64((ULong)(Addr)cache)));
   skey = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, slot));
   miss = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpNE64, skey, key));
   d = unsafeIRDirty_0_N(1, "pg_miss", VG_(fnptr_to_fnentry)(pg_miss), mkIRExprVec_1(a));
   d->guard = miss;
   addStmtToIRSB(sb, IRStmt_Dirty(d));

   ep = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, slot, mk_u64(8)));
   ep = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, ep));
   cp = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, ep,
                                          mk_u64(is_write ? __builtin_offsetof(Entry, writes)
                                                          : __builtin_offsetof(Entry, reads))));
   cnt = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, cp));
   cnt = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, cnt, mk_u64(1)));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, cp, cnt));

   n = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, mk_u64((ULong)(Addr)&left)));
   n1 = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Sub64, n, mk_u64(1)));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mk_u64((ULong)(Addr)&left), n1));
   end = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpEQ64, n1, mk_u64(0)));
   d = unsafeIRDirty_0_N(0, "pg_window_end", VG_(fnptr_to_fnentry)(pg_window_end),
                         mkIRExprVec_0());
   d->guard = end;
   addStmtToIRSB(sb, IRStmt_Dirty(d));
}

/* A C-helper call for one access, done only when `guard` (an I1 atom or NULL) holds. */
static void add_slow(IRSB* sb, IRExpr* addr, Bool is_write, IRExpr* guard)
{
   IRExpr* a = addr64(sb, addr);
   IRDirty* d = unsafeIRDirty_0_N(2, "pg_access", VG_(fnptr_to_fnentry)(pg_access),
                                  mkIRExprVec_2(a, mk_u64(is_write ? 1 : 0)));
   if (guard)
      d->guard = deepCopyIRExpr(guard);
   addStmtToIRSB(sb, IRStmt_Dirty(d));
}

static IRSB* pg_instrument(VgCallbackClosure* closure, IRSB* sbIn,
                           const VexGuestLayout* layout, const VexGuestExtents* vge,
                           const VexArchInfo* archinfo_host, IRType gWordTy,
                           IRType hWordTy)
{
   Int i;
   IRSB* sbOut;

   if (hWordTy != Ity_I64)
      VG_(tool_panic)("pagegrind: only 64-bit hosts are supported");
   sbOut = deepCopyIRSBExceptStmts(sbIn);
   for (i = 0; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
      case Ist_WrTmp:
         if (st->Ist.WrTmp.data->tag == Iex_Load)
            add_fast(sbOut, st->Ist.WrTmp.data->Iex.Load.addr, False);
         break;
      case Ist_Store:
         add_fast(sbOut, st->Ist.Store.addr, True);
         break;
      case Ist_LoadG:
         add_slow(sbOut, st->Ist.LoadG.details->addr, False, st->Ist.LoadG.details->guard);
         break;
      case Ist_StoreG:
         add_slow(sbOut, st->Ist.StoreG.details->addr, True, st->Ist.StoreG.details->guard);
         break;
      case Ist_CAS:
         add_slow(sbOut, st->Ist.CAS.details->addr, False, NULL);
         add_slow(sbOut, st->Ist.CAS.details->addr, True, NULL);
         break;
      case Ist_LLSC:
         add_slow(sbOut, st->Ist.LLSC.addr, st->Ist.LLSC.storedata != NULL, NULL);
         break;
      case Ist_Dirty: {
         IRDirty* d = st->Ist.Dirty.details;
         if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
            add_slow(sbOut, d->mAddr, False, d->guard);
         if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify)
            add_slow(sbOut, d->mAddr, True, d->guard);
         break;
      }
      default:
         break;
      }
      addStmtToIRSB(sbOut, st);
   }
   return sbOut;
}

static void pg_atfork_child(ThreadId tid)
{
   /* The forked child inherits the parent's file: it records nothing. */
   disabled = True;
   outlen = 0;
   out_fd = -1;
}

/* An execve that succeeds replaces the process without running pg_fini (Valgrind
   runs the new program natively), so the window so far is written first; if the
   execve fails, counting goes on in a new, shorter window. */
static void pg_pre_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nargs)
{
   ULong acc = (ULong)clo_window - left;
   Bool is_exec = sysno == __NR_execve;
#ifdef __NR_execveat
   is_exec = is_exec || sysno == __NR_execveat;
#endif
   static Bool told = False;
   if (!is_exec || disabled)
      return;
   if (!told)
      VG_(printf)("pagegrind: execve: the trace ends here (a new program runs untraced)\n");
   told = True;
   if (acc > 0)
      dump_window(acc);
}

static void pg_post_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nargs, SysRes res)
{
}

static Bool pg_process_cmd_line_option(const HChar* arg)
{
   if VG_BINT_CLO(arg, "--window", clo_window, 1, 0x7FFFFFFFFFFFFFFFLL) {}
   else if VG_STR_CLO(arg, "--out", clo_out) {}
   else
      return False;
   return True;
}

static void pg_print_usage(void)
{
   VG_(printf)(
"    --window=N       data accesses per window (epoch) [10000000]\n"
"    --out=FILE       output file; %%p is the pid [pagegrind.out.%%p]\n");
}

static void pg_print_debug_usage(void)
{
   VG_(printf)("    (none)\n");
}

static void pg_post_clo_init(void)
{
   out_name = VG_(expand_file_name)("--out", clo_out);
   out_fd = VG_(fd_open)(out_name, VKI_O_CREAT | VKI_O_WRONLY | VKI_O_TRUNC,
                         VKI_S_IRUSR | VKI_S_IWUSR | VKI_S_IRGRP | VKI_S_IROTH);
   if (out_fd < 0) {
      VG_(fmsg)("pagegrind: cannot open output file %s\n", out_name);
      VG_(exit)(1);
   }
   outbuf = VG_(malloc)("pg.outbuf", OUTBUF_SIZE);
   table_alloc(12);
   gen_key = gen << GEN_SHIFT;
   left = (ULong)clo_window;
   VG_(atfork)(NULL, NULL, pg_atfork_child);
}

static void pg_fini(Int exitcode)
{
   ULong acc = (ULong)clo_window - left;
   if (disabled)
      return;
   if (acc > 0 || epoch == 0)
      dump_window(acc);
   out_flush();
   VG_(close)(out_fd);
}

static void pg_pre_clo_init(void)
{
   VG_(details_name)("pagegrind");
   VG_(details_version)("1");
   VG_(details_description)("per-page read/write counts per window of accesses");
   VG_(details_copyright_author)("tierlab authors");
   VG_(details_bug_reports_to)("the tierlab project");
   VG_(details_avg_translation_sizeB)(600);
   VG_(basic_tool_funcs)(pg_post_clo_init, pg_instrument, pg_fini);
   VG_(needs_command_line_options)(pg_process_cmd_line_option, pg_print_usage,
                                   pg_print_debug_usage);
   VG_(needs_syscall_wrapper)(pg_pre_syscall, pg_post_syscall);
}

VG_DETERMINE_INTERFACE_VERSION(pg_pre_clo_init)
