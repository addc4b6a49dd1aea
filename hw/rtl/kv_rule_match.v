/*

pynq-kv: ternary (wildcard) rule matcher, SRL/LUT-RAM based (docs/engine.md §5.3, docs/rtl.md)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Rule match
 *
 * Compares one key per clock against RULES ternary entries and returns the
 * hit vector hit[e] = valid[e] && (key & mask[e]) == match[e] (engine.md
 * §5.3) with a fixed LATENCY of 2 clock cycles: a key presented on
 * lookup_key in cycle t gives hit[] in cycle t+2 (registered).  prio exposes
 * the priorities of all entries, registers, for the priority tree.
 *
 * Match table.  The key is cut into CHUNKS = ceil(KEY_W/5) chunks of 5 bits
 * (zero-padded at the top).  Every (entry, chunk) pair owns one 32-bit shift
 * register read at a variable tap, which the Xilinx tools map to one SRLC32E
 * (one LUT): bit a of the shift register of entry e, chunk c holds
 * ((a & mask_c) == match_c), so reading it at the key's chunk value tells
 * whether the chunk matches, and hit[e] is the AND over the chunks (and the
 * entry's valid bit).  The lookup needs no comparator per entry: the SRL
 * reads and their AND in the first cycle (written as the carry out of an
 * increment, so the AND is a carry chain fed directly by the shift
 * registers, not a tree of LUTs), the valid bit and the shadow selection
 * (below) in the second.
 *
 * Rewriting an entry means shifting 32 new bits into each of its CHUNKS
 * shift registers (all chunks in parallel, one bit per clock).  That runs in
 * the background, one entry at a time, REWRITE_CYCLES = 34 cycles per entry
 * (32 shifts, one cycle of registered write data, one cycle to retire).
 *
 * Shadow slots.  A write (wr_en) is stored in one of SLOTS shadow slots
 * (valid, match, mask of the new entry) at the end of the cycle it is
 * presented; from the next lookup on, the entry's hit comes from that slot's
 * own KEY_W-bit comparator instead of its shift registers, until the
 * background rewrite of that slot has finished.  So a write takes effect
 * atomically for the very next lookup, and lookups never wait for the
 * rewrite.  Slots are drained in order (a ring buffer); a newer write to the
 * same entry takes the entry over at once (the older slot still drains, its
 * shift-register contents are overwritten by the newer one later).
 *
 * Back-pressure.  wr_ready says that a write may be presented in the next
 * cycle (a slot will be free for it).  It is a register, so the writer's
 * admission logic does not see this module's slot count through
 * combinational logic: it is worked out a cycle ahead from wr_next, the
 * writer's word that a write may come in the next cycle (counted only in a
 * cycle with wr_ready high: no write can follow otherwise).  With wr_next
 * exact, wr_ready is low only while all SLOTS slots are busy, i.e. after more
 * than SLOTS writes within about SLOTS * 34 cycles; a steady write rate below
 * one per 34 cycles never sees it low.  wr_next may be high without a write
 * following (an upper bound); then wr_ready may be low for one cycle in which
 * SLOTS - 1 slots are busy.
 *
 * Priorities are registers (the tree reads all of them every cycle).  A
 * write's priority is stored one cycle after wr_en, because the tree samples
 * prio two cycles after the lookup, in the cycle hit[] appears: a lookup
 * presented before the write sees the old priority, every later one the new.
 *
 * Ordering: "lookup first, then write" within a cycle: a lookup presented
 * in the cycle of wr_en sees the entry as it was, every later one the new
 * entry (kv_engine presents a request-port key and a control-port write in
 * the same cycle, in that order, engine.md §5.7).
 *
 * Two lookups per cycle (LOOKUPS = 2, kv_engine's LOOKUP_PORTS = 2).  A
 * second key, lookup1_key, gives hit1 with the same latency, against the same
 * table: valid bits, slots and priorities are shared, and so is the order
 * (both lookups of a cycle come before that cycle's write).  An SRLC32E has
 * one read tap, so the second lookup has its own copy of every shift
 * register, shifted by the same writer with the same enable and data (Yosys
 * 0.23 keeps the copies apart: 2 x RULES x CHUNKS SRLC32E, measured; a
 * (* keep *) on them would stop SRL inference).  It also has its own AND
 * chains and slot compares.  With LOOKUPS = 1, lookup1_key is unused and
 * hit1 is zero.
 *
 * Reset clears the valid bits, the slots and the priorities; the shift
 * registers are not reset (nothing reads them while valid is 0).
 */
module kv_rule_match #
(
    // Key width in bits: 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Number of rule entries: 1 to 4096
    parameter RULES = 16,
    // Priority width in bits: 1 to 32
    parameter PRIO_W = 16,
    // Width of the entry address port: >= max(1, $clog2(RULES)) (the engine
    // passes exactly that; wr_entry must be < RULES, bits above are ignored)
    parameter ENTRY_W = 4,
    // Shadow slots (writes being rewritten in the background): 1 to 8
    parameter SLOTS = 4,
    // Lookups per cycle: 1 (lookup_key) or 2 (lookup_key and lookup1_key)
    parameter LOOKUPS = 1
)
(
    input  wire                    clk,
    input  wire                    rst,

    /*
     * Lookup: key in, hit vector two cycles later
     */
    input  wire [KEY_W-1:0]        lookup_key,
    output wire [RULES-1:0]        hit,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [KEY_W-1:0]        lookup1_key,  // unused with LOOKUPS = 1
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [RULES-1:0]        hit1,
    output wire [RULES*PRIO_W-1:0] prio,

    /*
     * Write port: the entry changes for every lookup presented after this
     * cycle; wr_en only in a cycle after one with wr_ready and wr_next high
     */
    input  wire                    wr_next,
    input  wire                    wr_en,
    input  wire [ENTRY_W-1:0]      wr_entry,
    input  wire                    wr_valid,
    input  wire [KEY_W-1:0]        wr_match,
    input  wire [KEY_W-1:0]        wr_mask,
    input  wire [PRIO_W-1:0]       wr_prio,
    output wire                    wr_ready,

    /*
     * Status: some background rewrite is pending or running
     */
    output wire                    rewrite_busy
);

localparam CHUNKS = (KEY_W + 4) / 5;               // 5-bit key chunks, one SRL each
localparam PAD_W = CHUNKS * 5;                     // key width padded to whole chunks
localparam CMP_GB = 12;                            // key bits per partial compare of a slot
localparam CMP_G = KEY_W / CMP_GB;                 // partial compares per slot (every KEY_W is a multiple of 12)
localparam SLOT_W = (SLOTS > 1) ? $clog2(SLOTS) : 1;
localparam CNT_W = $clog2(SLOTS + 1);
localparam RIDX_W = (RULES > 1) ? $clog2(RULES) : 1;

// check configuration
initial begin
    if (KEY_W != 144 && KEY_W != 288 && KEY_W != 576 && KEY_W != 1152) begin
        $error("Error: KEY_W must be 144, 288, 576 or 1152 (instance %m)");
        $finish;
    end
    if (RULES < 1 || RULES > 4096) begin
        $error("Error: RULES must be 1 to 4096 (instance %m)");
        $finish;
    end
    if (PRIO_W < 1 || PRIO_W > 32) begin
        $error("Error: PRIO_W must be 1 to 32 (instance %m)");
        $finish;
    end
    if (ENTRY_W < RIDX_W) begin
        $error("Error: ENTRY_W too narrow for RULES (instance %m)");
        $finish;
    end
    if (SLOTS < 1 || SLOTS > 8) begin
        $error("Error: SLOTS must be 1 to 8 (instance %m)");
        $finish;
    end
    if (LOOKUPS != 1 && LOOKUPS != 2) begin
        $error("Error: LOOKUPS must be 1 or 2 (instance %m)");
        $finish;
    end
end

/*
 * Shadow slots (ring buffer: written at tail, drained at head)
 */
reg [SLOTS-1:0]          slot_valid;
reg [SLOTS*RIDX_W-1:0]   slot_entry;
reg [SLOTS*KEY_W-1:0]    slot_match;
reg [SLOTS*KEY_W-1:0]    slot_mask;
reg [SLOT_W-1:0]         head_reg;
reg [SLOT_W-1:0]         tail_reg;
reg [CNT_W-1:0]          count_reg;

// per entry: valid (as written back), overridden by a slot, and by which
reg [RULES-1:0]          valid_reg;
reg [RULES-1:0]          ovr_reg;
reg [RULES*SLOT_W-1:0]   ovr_slot_reg;
reg [RULES*PRIO_W-1:0]   prio_reg;

// background writer
reg [5:0]                wcnt_reg;          // phase of the head slot: 0..33
reg [CHUNKS-1:0]         bus_reg;           // shift-in bit of every chunk
reg [RULES-1:0]          ce_reg;            // shift enable of every entry

// the write, one and two cycles later (takes over the entry / sets its priority)
reg                      pw1_en_reg;
reg [RIDX_W-1:0]         pw1_entry_reg;
reg [SLOT_W-1:0]         pw1_slot_reg;
reg [PRIO_W-1:0]         pw1_prio_reg;
reg                      pw2_en_reg;
reg [RIDX_W-1:0]         pw2_entry_reg;
reg [PRIO_W-1:0]         pw2_prio_reg;

wire [RIDX_W-1:0] w_entry = wr_entry[RIDX_W-1:0];
wire busy_any = count_reg != {CNT_W{1'b0}};
wire shifting = busy_any && wcnt_reg < 6'd32;
wire retire = busy_any && wcnt_reg == 6'd33;

wire [CNT_W-1:0] count_next = count_reg + {{(CNT_W-1){1'b0}}, wr_en} - {{(CNT_W-1){1'b0}}, retire};
// the head slot retires in the next cycle (wcnt_reg reaches 33 only from 32 while busy)
wire retire_soon = busy_any && wcnt_reg == 6'd32;

// wr_ready of the next cycle: the slots busy after it, counting an announced write (wr_next
// with wr_ready) as its write, leave one free.  One bit wider than count_next: count_next plus
// the announced write reaches SLOTS + 1.
reg ready_reg;
wire announced = wr_next && ready_reg;
wire [CNT_W:0] count_soon = {1'b0, count_next} + {{CNT_W{1'b0}}, announced} - {{CNT_W{1'b0}}, retire_soon};

assign wr_ready = ready_reg;
assign rewrite_busy = busy_any;
assign prio = prio_reg;

function [SLOT_W-1:0] slot_inc(input [SLOT_W-1:0] s);
    begin
        if ({{(32-SLOT_W){1'b0}}, s} == SLOTS - 1) begin
            slot_inc = {SLOT_W{1'b0}};
        end else begin
            slot_inc = s + 1'b1;
        end
    end
endfunction

// head slot contents (for the writer)
reg              h_valid;
reg [RIDX_W-1:0] h_entry;
reg [PAD_W-1:0]  h_match;
reg [PAD_W-1:0]  h_mask;
reg [CHUNKS-1:0] bus_next;
reg [4:0]        w_addr;

integer s, c;

always @* begin
    h_valid = 1'b0;
    h_entry = {RIDX_W{1'b0}};
    h_match = {PAD_W{1'b0}};
    h_mask = {PAD_W{1'b0}};
    for (s = 0; s < SLOTS; s = s + 1) begin
        if (head_reg == s[SLOT_W-1:0]) begin
            h_valid = slot_valid[s];
            h_entry = slot_entry[s*RIDX_W +: RIDX_W];
            h_match[KEY_W-1:0] = slot_match[s*KEY_W +: KEY_W];
            h_mask[KEY_W-1:0] = slot_mask[s*KEY_W +: KEY_W];
        end
    end
    // shift-in bits: shift register address 31 first, 0 last
    w_addr = ~wcnt_reg[4:0];
    for (c = 0; c < CHUNKS; c = c + 1) begin
        bus_next[c] = (w_addr & h_mask[c*5 +: 5]) == h_match[c*5 +: 5];
    end
end

/*
 * The lookups' keys, lookup l at bits [l*KEY_W +: KEY_W]
 */
wire [LOOKUPS*KEY_W-1:0] keys;

generate
    if (LOOKUPS == 2) begin : g_keys2
        assign keys = {lookup1_key, lookup_key};
    end else begin : g_keys1
        assign keys = lookup_key;
    end
endgenerate

/*
 * Match table: one 32-bit shift register per (entry, chunk, lookup), read
 * at the lookup's key chunk; first cycle: SRL read and the AND of all
 * chunks, registered (all_reg bit l*RULES + e)
 */
reg [LOOKUPS*RULES-1:0] all_reg;

genvar gl, gr, gc, gs;

generate
    for (gl = 0; gl < LOOKUPS; gl = gl + 1) begin : lookup
        wire [PAD_W-1:0] key_pad = {{(PAD_W-KEY_W){1'b0}}, keys[gl*KEY_W +: KEY_W]};

        for (gr = 0; gr < RULES; gr = gr + 1) begin : entry
            wire [CHUNKS-1:0] q;
            // AND of all chunks as the carry out of {0, q, 1} + 1: a carry chain
            // (CARRY8) fed straight by the shift registers, no LUT per chunk group
            wire [CHUNKS+1:0] q_sum = {1'b0, q, 1'b1} + {{(CHUNKS+1){1'b0}}, 1'b1};

            for (gc = 0; gc < CHUNKS; gc = gc + 1) begin : chunk
                reg [31:0] sr;

                initial begin
                    sr = 32'd0;
                end

                always @(posedge clk) begin
                    if (ce_reg[gr]) begin
                        sr <= {sr[30:0], bus_reg[gc]};
                    end
                end

                assign q[gc] = sr[key_pad[gc*5 +: 5]];
            end

            always @(posedge clk) begin
                all_reg[gl*RULES + gr] <= q_sum[CHUNKS+1];
            end
        end
    end
endgenerate

/*
 * Shadow comparators: first cycle partial compares, registered (cmp_reg bit
 * (l*SLOTS + slot)*CMP_G + part)
 */
reg [LOOKUPS*SLOTS*CMP_G-1:0] cmp_reg;

generate
    for (gl = 0; gl < LOOKUPS; gl = gl + 1) begin : lookup_cmp
        for (gs = 0; gs < SLOTS; gs = gs + 1) begin : slot_cmp
            wire [KEY_W-1:0] k = keys[gl*KEY_W +: KEY_W];
            wire [KEY_W-1:0] m = slot_mask[gs*KEY_W +: KEY_W];
            wire [KEY_W-1:0] x = slot_match[gs*KEY_W +: KEY_W];

            for (gc = 0; gc < CMP_G; gc = gc + 1) begin : part
                always @(posedge clk) begin
                    cmp_reg[(gl*SLOTS + gs)*CMP_G + gc] <= (k[gc*CMP_GB +: CMP_GB] & m[gc*CMP_GB +: CMP_GB]) == x[gc*CMP_GB +: CMP_GB];
                end
            end
        end
    end
endgenerate

/*
 * Second cycle: finish the ANDs, take overridden entries from their slot
 * (hit_reg bit l*RULES + e)
 */
reg [LOOKUPS*SLOTS-1:0] slot_hit;
reg [LOOKUPS*RULES-1:0] hit_next;
reg [LOOKUPS*RULES-1:0] hit_reg;

assign hit = hit_reg[RULES-1:0];

generate
    if (LOOKUPS == 2) begin : g_hit1
        assign hit1 = hit_reg[RULES +: RULES];
    end else begin : g_no_hit1
        assign hit1 = {RULES{1'b0}};
    end
endgenerate

integer hl, hs, r;

always @* begin
    for (hl = 0; hl < LOOKUPS; hl = hl + 1) begin
        for (hs = 0; hs < SLOTS; hs = hs + 1) begin
            slot_hit[hl*SLOTS + hs] = slot_valid[hs] && (&cmp_reg[(hl*SLOTS + hs)*CMP_G +: CMP_G]);
        end
        for (r = 0; r < RULES; r = r + 1) begin
            hit_next[hl*RULES + r] = valid_reg[r] && all_reg[hl*RULES + r];
            if (ovr_reg[r]) begin
                hit_next[hl*RULES + r] = 1'b0;
                for (hs = 0; hs < SLOTS; hs = hs + 1) begin
                    if (ovr_slot_reg[r*SLOT_W +: SLOT_W] == hs[SLOT_W-1:0]) begin
                        hit_next[hl*RULES + r] = slot_hit[hl*SLOTS + hs];
                    end
                end
            end
        end
    end
end

/*
 * Sequential state
 */
integer si, ri;

always @(posedge clk) begin
    hit_reg <= hit_next;

    // store a write in the tail slot; the entry is overridden by it from now on
    if (wr_en) begin
        for (si = 0; si < SLOTS; si = si + 1) begin
            if (tail_reg == si[SLOT_W-1:0]) begin
                slot_valid[si] <= wr_valid;
                slot_entry[si*RIDX_W +: RIDX_W] <= w_entry;
                slot_match[si*KEY_W +: KEY_W] <= wr_match;
                slot_mask[si*KEY_W +: KEY_W] <= wr_mask;
            end
        end
        tail_reg <= slot_inc(tail_reg);
    end
    count_reg <= count_next;
    ready_reg <= count_soon < SLOTS;

    // background writer: shift phase of the head slot, registered write data
    bus_reg <= bus_next;
    for (ri = 0; ri < RULES; ri = ri + 1) begin
        ce_reg[ri] <= shifting && h_entry == ri[RIDX_W-1:0];
    end
    if (retire) begin
        wcnt_reg <= 6'd0;
        head_reg <= slot_inc(head_reg);
    end else if (busy_any) begin
        wcnt_reg <= wcnt_reg + 6'd1;
    end

    // per entry state: retiring a slot hands its entry back to the shift
    // registers (unless a newer slot holds it); a new write takes it over
    for (ri = 0; ri < RULES; ri = ri + 1) begin
        if (retire && h_entry == ri[RIDX_W-1:0]) begin
            valid_reg[ri] <= h_valid;
            if (ovr_slot_reg[ri*SLOT_W +: SLOT_W] == head_reg) begin
                ovr_reg[ri] <= 1'b0;
            end
        end
        if (pw1_en_reg && pw1_entry_reg == ri[RIDX_W-1:0]) begin
            ovr_reg[ri] <= 1'b1;
            ovr_slot_reg[ri*SLOT_W +: SLOT_W] <= pw1_slot_reg;
        end
    end

    // the write takes the entry over one cycle after it was presented (from
    // the hit of the next cycle's lookup on) and sets the priority two cycles
    // after (from the prio sampled for that lookup on)
    pw1_en_reg <= wr_en;
    pw1_entry_reg <= w_entry;
    pw1_slot_reg <= tail_reg;
    pw1_prio_reg <= wr_prio;
    pw2_en_reg <= pw1_en_reg;
    pw2_entry_reg <= pw1_entry_reg;
    pw2_prio_reg <= pw1_prio_reg;
    for (ri = 0; ri < RULES; ri = ri + 1) begin
        if (pw2_en_reg && pw2_entry_reg == ri[RIDX_W-1:0]) begin
            prio_reg[ri*PRIO_W +: PRIO_W] <= pw2_prio_reg;
        end
    end

    if (rst) begin
        head_reg <= {SLOT_W{1'b0}};
        tail_reg <= {SLOT_W{1'b0}};
        count_reg <= {CNT_W{1'b0}};
        ready_reg <= 1'b1;
        wcnt_reg <= 6'd0;
        ce_reg <= {RULES{1'b0}};
        valid_reg <= {RULES{1'b0}};
        ovr_reg <= {RULES{1'b0}};
        prio_reg <= {RULES*PRIO_W{1'b0}};
        pw1_en_reg <= 1'b0;
        pw2_en_reg <= 1'b0;
        hit_reg <= {LOOKUPS*RULES{1'b0}};
    end
end

endmodule

`resetall
