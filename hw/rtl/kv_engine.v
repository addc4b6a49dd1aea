/*

pynq-kv: the lookup engine pipeline (docs/engine.md §4-§6, docs/rtl.md)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Lookup engine
 *
 * Two request ports, each one request per clock with its own response
 * stream: the request port (s_axis_req_* -> m_axis_rsp_*: GET, LOOKUP, SET,
 * DEL, READ_SLOT, WRITE_SLOT, MOVE, CLEAR_TABLE) and the control port
 * (s_axis_ctl_req_* -> m_axis_ctl_rsp_*: the opcodes of KV_OP_CTL_MASK,
 * WRITE_RULE, READ_RULE, CLEAR_COUNTERS, READ_COUNTER, READ_RULE_HITS).  An
 * opcode sent to the other port is refused (status 15, counts cmd_errors).
 * Each port answers in its own request order with a fixed latency when its
 * response stream is not back-pressured: LATENCY clock cycles on the
 * request port, LATENCY + 1 on the control port (a request accepted at
 * rising edge n has its response valid at edge n+LATENCY, resp. n+LATENCY+1;
 * a handshake there if tready is high).  tuser (TAG_W bits) comes back with
 * the response.
 *
 * With LOOKUP_PORTS = 2 a second request port (s_axis_req1_* ->
 * m_axis_rsp1_*) takes the request port's opcodes with the same contract,
 * latency and its own response stream and credits.  A port-1 request
 * offered while port 0 offers nothing goes through the request lane (lane
 * A).  A port-1 GET offered beside a port-0 GET or LOOKUP that is taken is
 * taken in the same cycle into lane B, a second, read-only lane (b_*: its
 * own hash unit, the second port of every bank RAM, its own compare and
 * execute against lane A's forwarding window and stash), and comes after
 * port 0's in the order.  Port 1 is never taken while port 0 offers and is
 * not taken (a feeder that splits one ordered stream over the two ports
 * keeps its order; it may move an untaken port-1 request to port 0).  Lane
 * B reads a bank RAM's port B, which is also its write port: in the cycle in
 * which a write of lane A reaches the RAMs, no pair is taken whose lane-B
 * read would meet it (b_block, worked out RAM_LAT + 2 cycles ahead from lane
 * A's acceptances).  LOOKUP pairs and writes beside reads are the next steps
 * (docs/lookup_ports2.md).
 *
 * Order (engine.md §5.7): the requests of all ports take effect as one
 * sequence, by acceptance cycle, and within a cycle the request port's
 * first (then port 1's, then the control port's).  A WRITE_RULE accepted in cycle t is seen by every LOOKUP accepted
 * after t and by none accepted up to t; a READ_COUNTER or READ_RULE_HITS
 * accepted in t counts the LOOKUPs accepted up to and including t.
 *
 * Admission is credit based, per port: a request is accepted only while the
 * number of that port's requests accepted and not yet answered is below its
 * FIFO depth (RSP_FIFO_DEPTH, CTL_FIFO_DEPTH), so the pipeline never stalls
 * and the response FIFOs never overflow.  The request port's tready is also
 * low while the table is being cleared (CLEAR_TABLE and after reset: a sweep
 * of ROWS cycles writing every row of every way invalid), and for one cycle
 * after it accepts a MOVE (see Hazards); the control port's
 * is low, when the request offered is a WRITE_RULE, while the rule matcher
 * has no free shadow slot (more than RULE_SLOTS rule writes within about
 * RULE_SLOTS * 34 cycles, kv_rule_match).  Neither port ever waits for the
 * other: the request port never waits for the rules.
 *
 * Stream layouts, opcodes, status codes and counter ids come from the
 * generated kv_regs.vh (hw/regmap); the initial block checks the widths.
 * Request tdata (fields from bit 0 up; widths fixed, offsets as docs/rtl.md):
 *   op 5 | flag 1 | bank 4 | index 24 | bank2 4 | index2 24 | entry 12 |
 *   prio 32 | key KEY_W | mask KEY_W | value VALUE_W
 * READ_COUNTER takes the counter id in `index`.
 *
 * Response tdata:
 *   op 5 | status 4 | flag 1 | entry 12 | prio 32 | data64 64 |
 *   key KEY_W | mask KEY_W | value VALUE_W
 * status: GET/LOOKUP MatchKind (0 MISS, 1 EXACT, 2 RULE), SET SetStatus
 * (0 INSERTED, 1 INSERTED_STASH, 2 UPDATED, 3 FULL), DEL DelStatus
 * (0 DELETED, 1 NOT_FOUND), control operations 0 = done, 15 = refused
 * (counts cmd_errors; also every unknown opcode).  Fields an operation does
 * not define are zero.
 *   GET/LOOKUP hit: value; LOOKUP RULE: entry, prio (of the winning entry),
 *   value.  READ_SLOT: flag = valid, key, value.  READ_RULE: flag = valid,
 *   entry, prio, key = match, mask, value.  READ_COUNTER / READ_RULE_HITS:
 *   data64.  Other operations echo nothing.
 *
 * Pipeline (stage s = cycles after the request was registered in stage 0;
 * the control port's requests run through the same stages in a lane of
 * their own, c_*, beside the request lane, p_*):
 *   0                 request register; key into the rule matcher
 *                     (kv_rule_match, hit vector at stage 2), which is also
 *                     where the control lane's WRITE_RULE takes effect (after
 *                     the key of the same cycle)
 *   0 .. H            kv_h3_hash, rows at stage H = HASH_STAGES
 *   H+1               per-way address: the key's row, or the control address
 *   A = K-RAM_LAT     bank RAM read (one kv_bank_ram per way)
 *   2 .. V            priority tree (kv_prio_tree), V = 2 + tree latency;
 *                     the rule value RAM is read at V (the winner) and
 *                     written at V+1 by the control lane (a write meeting a
 *                     read of its entry is forwarded); the control lane's
 *                     rule RAM (valid, match, mask, prio, value: what
 *                     READ_RULE returns) is read and written at V
 *   E-1               rule hit counter RAM read (one copy per lane: the
 *                     LOOKUP's winner; the control request's entry)
 *   K = E-1           compare: forwarding, ways and stash against the key
 *   E                 execute: the write of the request ahead folded in,
 *                     decide, counters, stash update, rule hit counter
 *                     forwarding, response
 *   E+1               control lane only: its execute, in the cycle of the
 *                     request lane's execute of the request accepted one
 *                     cycle after it, and ahead of it: it reads counters and
 *                     rule hit counts from registers and the window, and
 *                     its clears (CLEAR_COUNTERS, WRITE_RULE's zero) come
 *                     before that request's updates
 *   E+1               way and rule hit counter writes presented to the RAMs;
 *                     response in FIFO
 *   E = max(H + 2 + RAM_LAT, V + 2), LATENCY = E + 2 (control port: E + 3).
 *
 * Hazards: a request reads a way RAM RAM_LAT cycles before it compares, so
 * the writes of the RAM_LAT + 1 requests executed just before that may be
 * missing from what it read.  Those writes are kept (per way: enable, row,
 * word) in a forwarding window; at the compare stage each way takes the
 * newest window write to its row, else the RAM output, and compares it and
 * the stash with the key.  The request executing in that same cycle writes
 * after the compare: its write (window entry 0 and its stash writes, one
 * cycle later) replaces the compare's result at execute, through a key
 * equality and row matches worked out at the compare stage.  That takes its
 * key to be the word's key, which holds for everything but a MOVE (it writes
 * another slot's key), so a MOVE keeps the cycle after it free.  The rule
 * hit counters (a RAM, read at E-1) have a two-deep window of the same kind,
 * and a per-entry "fresh" bit that CLEAR_COUNTERS (every entry) and
 * WRITE_RULE (its entry) clear (an entry not fresh reads 0; the window's
 * writes it covers are dropped).
 * The stash and the counters are registers updated at execute (a counter's
 * change, an increment or occupancy's delta, is added one cycle later from a
 * pending register, which READ_COUNTER adds and CLEAR_COUNTERS clears, so no
 * execute decision reaches a 64-bit adder); the rule
 * matcher is updated at stage 0 and the rule RAMs at V / V+1 as above, so
 * every request sees exactly the state left by the requests ahead of it in
 * the order above (engine.md §5, §5.7).  Nothing ever stalls the pipeline
 * once a request is accepted.
 */
module kv_engine #
(
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: multiple of 32, 32 to 512
    parameter VALUE_W = 32,
    // Hash banks (ways), one RAM each: 2 to 8
    parameter WAYS = 4,
    // Rows per bank: power of two, 2 to 2^24
    parameter ROWS = 1024,
    // Fully-associative overflow (stash) entries, in registers: 0 to 64
    parameter STASH = 8,
    // Wildcard rule entries: 0 to 4096 (0: no rule table, rule operations refused)
    parameter RULES = 16,
    // Rule priority width in bits: 1 to 32
    parameter PRIO_W = 16,
    // 64-bit seed of the hash family (engine.md §3)
    parameter [63:0] HASH_SEED = 64'h70796E712D6B7631,
    // Width of the request tag (tuser) returned with each response: >= 1
    parameter TAG_W = 8,
    // Pipeline stages of the hash unit (kv_h3_hash STAGES): 1 to 6
    parameter HASH_STAGES = 2,
    // Bank RAM read latency: 1, or 2 for the BRAM output register
    parameter RAM_LAT = 1,
    // Priority tree compare levels per pipeline stage: >= 1
    parameter TREE_LEVELS_PER_STAGE = 2,
    // Rule writes the matcher takes while earlier ones are rewritten in the
    // background (kv_rule_match SLOTS): 1 to 8
    parameter RULE_SLOTS = 4,
    // Response FIFO depth (also the admission credit): > LATENCY for full
    // throughput, >= 2
    parameter RSP_FIFO_DEPTH = 16,
    // Control port response FIFO depth (its admission credit): >= 2; the
    // control port takes one request per clock only when > LATENCY + 1
    parameter CTL_FIFO_DEPTH = 16,
    // Request tdata width: derived, do not override
    parameter REQ_W = 106 + 2*KEY_W + VALUE_W,
    // Response tdata width: derived, do not override
    parameter RSP_W = 118 + 2*KEY_W + VALUE_W,
    // Number of 64-bit counters on stat_counters: must equal KV_NUM_COUNTERS (checked)
    parameter NUM_COUNTERS = 11,
    // 1: drive the mutation port (log_*) for a change log; 0: no log, its outputs stay 0
    parameter LOG_PORT = 1,
    // Request ports: 1, or 2 (s_axis_req1_* / m_axis_rsp1_* take requests too)
    parameter LOOKUP_PORTS = 1
)
(
    input  wire                 clk,
    input  wire                 rst,

    /*
     * Request stream
     */
    input  wire [REQ_W-1:0]     s_axis_req_tdata,
    input  wire                 s_axis_req_tvalid,
    output wire                 s_axis_req_tready,
    input  wire [TAG_W-1:0]     s_axis_req_tuser,

    /*
     * Response stream
     */
    output wire [RSP_W-1:0]     m_axis_rsp_tdata,
    output wire                 m_axis_rsp_tvalid,
    input  wire                 m_axis_rsp_tready,
    output wire [TAG_W-1:0]     m_axis_rsp_tuser,

    /*
     * Second request and response streams (LOOKUP_PORTS = 2; with 1 the
     * port takes nothing and answers nothing)
     */
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [REQ_W-1:0]     s_axis_req1_tdata,
    input  wire                 s_axis_req1_tvalid,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                 s_axis_req1_tready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [TAG_W-1:0]     s_axis_req1_tuser,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [RSP_W-1:0]     m_axis_rsp1_tdata,
    output wire                 m_axis_rsp1_tvalid,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                 m_axis_rsp1_tready,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [TAG_W-1:0]     m_axis_rsp1_tuser,

    /*
     * Control request stream (rule and counter operations, KV_OP_CTL_MASK)
     */
    input  wire [REQ_W-1:0]     s_axis_ctl_req_tdata,
    input  wire                 s_axis_ctl_req_tvalid,
    output wire                 s_axis_ctl_req_tready,
    input  wire [TAG_W-1:0]     s_axis_ctl_req_tuser,

    /*
     * Control response stream
     */
    output wire [RSP_W-1:0]     m_axis_ctl_rsp_tdata,
    output wire                 m_axis_ctl_rsp_tvalid,
    input  wire                 m_axis_ctl_rsp_tready,
    output wire [TAG_W-1:0]     m_axis_ctl_rsp_tuser,

    /*
     * Counters of engine.md §6 for the CSR block, counter c at [64*c +: 64];
     * a request's increment shows here one cycle after its execute (the
     * control port's READ_COUNTER includes it at once)
     */
    output wire [NUM_COUNTERS*64-1:0] stat_counters,

    /*
     * Mutations (engine.md §10): a one-cycle log_valid, registered, per SET
     * that changed the table and per DEL (found or not), in execution
     * order, registered at the clock edge that puts its response into the
     * response FIFO, with the request's tag, key and value and the
     * operation's status.  Never
     * back-pressured: whoever keeps a log takes it or counts it lost.
     */
    output wire                 log_valid,
    output wire                 log_del,
    output wire [3:0]           log_status,
    output wire [KEY_W-1:0]     log_key,
    output wire [VALUE_W-1:0]   log_value,
    output wire [TAG_W-1:0]     log_tag
);

function integer max2(input integer a, input integer b);
    begin
        max2 = (a > b) ? a : b;
    end
endfunction

// register map and stream layout, generated from hw/regmap/kv_regs.json
// (opcodes KV_OP_*, status codes KV_ST_*, counter ids KV_CNT_*, tdata fields KV_REQ_*/KV_RSP_*)
`include "kv_regs.vh"

// opcodes (docs/rtl.md)
localparam [4:0] OP_GET = KV_OP_GET;
localparam [4:0] OP_LOOKUP = KV_OP_LOOKUP;
localparam [4:0] OP_SET = KV_OP_SET;
localparam [4:0] OP_DEL = KV_OP_DEL;
localparam [4:0] OP_READ_SLOT = KV_OP_READ_SLOT;
localparam [4:0] OP_WRITE_SLOT = KV_OP_WRITE_SLOT;
localparam [4:0] OP_MOVE = KV_OP_MOVE;
localparam [4:0] OP_WRITE_RULE = KV_OP_WRITE_RULE;
localparam [4:0] OP_READ_RULE = KV_OP_READ_RULE;
localparam [4:0] OP_CLEAR_TABLE = KV_OP_CLEAR_TABLE;
localparam [4:0] OP_CLEAR_COUNTERS = KV_OP_CLEAR_COUNTERS;
localparam [4:0] OP_READ_COUNTER = KV_OP_READ_COUNTER;
localparam [4:0] OP_READ_RULE_HITS = KV_OP_READ_RULE_HITS;

// response status codes
localparam [3:0] ST_OK = KV_ST_OK;
localparam [3:0] ST_MISS = KV_ST_MATCH_MISS;
localparam [3:0] ST_EXACT = KV_ST_MATCH_EXACT;
localparam [3:0] ST_RULE = KV_ST_MATCH_RULE;
localparam [3:0] ST_INSERTED = KV_ST_SET_INSERTED;
localparam [3:0] ST_INSERTED_STASH = KV_ST_SET_INSERTED_STASH;
localparam [3:0] ST_UPDATED = KV_ST_SET_UPDATED;
localparam [3:0] ST_FULL = KV_ST_SET_FULL;
localparam [3:0] ST_DELETED = KV_ST_DEL_DELETED;
localparam [3:0] ST_NOT_FOUND = KV_ST_DEL_NOT_FOUND;
localparam [3:0] ST_REFUSED = KV_ST_REFUSED;

// counter ids (engine.md §6)
localparam C_LOOKUPS = KV_CNT_LOOKUPS;
localparam C_EXACT_HITS = KV_CNT_EXACT_HITS;
localparam C_RULE_HITS = KV_CNT_RULE_HITS;
localparam C_MISSES = KV_CNT_MISSES;
localparam C_INSERTS = KV_CNT_INSERTS;
localparam C_UPDATES = KV_CNT_UPDATES;
localparam C_INSERT_FAILURES = KV_CNT_INSERT_FAILURES;
localparam C_DELETES = KV_CNT_DELETES;
localparam C_DELETE_MISSES = KV_CNT_DELETE_MISSES;
localparam C_CMD_ERRORS = KV_CNT_CMD_ERRORS;
localparam C_OCCUPANCY = KV_CNT_OCCUPANCY;
localparam NCNT = KV_NUM_COUNTERS;

// request fields (the widths are fixed by docs/rtl.md; checked below)
localparam RQ_OP = KV_REQ_OP_LSB;
localparam RQ_FLAG = KV_REQ_FLAG_LSB;
localparam RQ_BANK = KV_REQ_BANK_LSB;
localparam RQ_INDEX = KV_REQ_INDEX_LSB;
localparam RQ_BANK2 = KV_REQ_BANK2_LSB;
localparam RQ_INDEX2 = KV_REQ_INDEX2_LSB;
localparam RQ_ENTRY = KV_REQ_ENTRY_LSB;
localparam RQ_PRIO = KV_REQ_PRIO_LSB;
localparam RQ_KEY = KV_REQ_KEY_LSB;
localparam RQ_MASK = KV_REQ_MASK_LSB;
localparam RQ_VALUE = KV_REQ_VALUE_LSB;

// response fields
localparam RS_OP = KV_RSP_OP_LSB;
localparam RS_STATUS = KV_RSP_STATUS_LSB;
localparam RS_FLAG = KV_RSP_FLAG_LSB;
localparam RS_ENTRY = KV_RSP_ENTRY_LSB;
localparam RS_PRIO = KV_RSP_PRIO_LSB;
localparam RS_DATA64 = KV_RSP_DATA64_LSB;
localparam RS_KEY = KV_RSP_KEY_LSB;
localparam RS_MASK = KV_RSP_MASK_LSB;
localparam RS_VALUE = KV_RSP_VALUE_LSB;

// geometry
localparam ROW_BITS = $clog2(ROWS);
localparam ENT_W = 1 + KEY_W + VALUE_W;            // bank word: {valid, key, value}
localparam STASH_N = (STASH > 0) ? STASH : 1;      // array size (unused entry when STASH = 0)
localparam RULES_N = (RULES > 0) ? RULES : 1;
localparam RIDX_W = (RULES > 1) ? $clog2(RULES) : 1;
localparam RULES_P = 1 << RIDX_W;                  // RULES rounded up to a power of two

// pipeline
localparam TREE_LEVELS = (RULES_N > 1) ? $clog2(RULES_N) : 1;
localparam TREE_LAT = (TREE_LEVELS + TREE_LEVELS_PER_STAGE - 1) / TREE_LEVELS_PER_STAGE;
localparam M_LAT = 2;                               // kv_rule_match latency
localparam H_ST = HASH_STAGES;                      // rows from the hash unit
localparam V_ST = M_LAT + TREE_LAT;                 // tree output, rule RAM read
localparam RULE_W = 1 + 2*KEY_W + PRIO_W + VALUE_W; // rule RAM word: {valid, match, mask, prio, value}
localparam E_ST = max2(H_ST + 2 + RAM_LAT, V_ST + 2);  // execute: decide and write
localparam K_ST = E_ST - 1;                         // compare: the ways' words and the stash
localparam A_ST = K_ST - RAM_LAT;                   // bank RAM read address
localparam NST = E_ST + 1;                          // stages 0 .. E
localparam CE_ST = E_ST + 1;                        // control lane execute
localparam CNST = CE_ST + 1;                        // control lane stages 0 .. E+1
localparam WIN = RAM_LAT + 1;                       // forwarding window (writes)
/* verilator lint_off UNUSEDPARAM */
// response latency in cycles, documented in the header (and checked by the testbench)
localparam LATENCY = E_ST + 2;
/* verilator lint_on UNUSEDPARAM */
localparam CNT_W = $clog2(RSP_FIFO_DEPTH + 1);
localparam FIFO_AW = (RSP_FIFO_DEPTH > 1) ? $clog2(RSP_FIFO_DEPTH) : 1;
localparam CCNT_W = $clog2(CTL_FIFO_DEPTH + 1);
localparam CFIFO_AW = (CTL_FIFO_DEPTH > 1) ? $clog2(CTL_FIFO_DEPTH) : 1;
// the request lane's responses never carry data64 or mask (control-port
// fields): its FIFO stores {tag, value, key, the fields below data64}
localparam FIFO_W = RS_DATA64 + KEY_W + VALUE_W + TAG_W;
localparam CFIFO_W = RSP_W + TAG_W;

// sized constants for address checks
localparam [24:0] ROWS_C = ROWS;
localparam [ROW_BITS-1:0] LAST_ROW = {ROW_BITS{1'b1}};    // ROWS - 1
localparam [24:0] STASH_C = STASH;
localparam [12:0] RULES_C = RULES;
localparam [3:0] WAYS_C = WAYS;

// check configuration
initial begin
    if (KEY_W != 144 && KEY_W != 288 && KEY_W != 576 && KEY_W != 1152) begin
        $error("Error: KEY_W must be 144, 288, 576 or 1152 (instance %m)");
        $finish;
    end
    if (LOG_PORT != 0 && LOG_PORT != 1) begin
        $error("Error: LOG_PORT must be 0 or 1 (instance %m)");
        $finish;
    end
    if (LOOKUP_PORTS != 1 && LOOKUP_PORTS != 2) begin
        $error("Error: LOOKUP_PORTS must be 1 or 2 (instance %m)");
        $finish;
    end
    if (VALUE_W < 32 || VALUE_W > 512 || VALUE_W % 32 != 0) begin
        $error("Error: VALUE_W must be a multiple of 32 from 32 to 512 (instance %m)");
        $finish;
    end
    if (WAYS < 2 || WAYS > 8) begin
        $error("Error: WAYS must be 2 to 8 (instance %m)");
        $finish;
    end
    if (ROWS < 2 || ROWS > 2**24 || (ROWS & (ROWS - 1)) != 0) begin
        $error("Error: ROWS must be a power of two from 2 to 2^24 (instance %m)");
        $finish;
    end
    if (STASH < 0 || STASH > 64) begin
        $error("Error: STASH must be 0 to 64 (instance %m)");
        $finish;
    end
    if (RULES < 0 || RULES > 4096) begin
        $error("Error: RULES must be 0 to 4096 (instance %m)");
        $finish;
    end
    if (PRIO_W < 1 || PRIO_W > 32) begin
        $error("Error: PRIO_W must be 1 to 32 (instance %m)");
        $finish;
    end
    if (TAG_W < 1) begin
        $error("Error: TAG_W must be at least 1 (instance %m)");
        $finish;
    end
    if (HASH_STAGES < 1 || HASH_STAGES > 6) begin
        $error("Error: HASH_STAGES must be 1 to 6 (instance %m)");
        $finish;
    end
    if (RAM_LAT != 1 && RAM_LAT != 2) begin
        $error("Error: RAM_LAT must be 1 or 2 (instance %m)");
        $finish;
    end
    if (TREE_LEVELS_PER_STAGE < 1) begin
        $error("Error: TREE_LEVELS_PER_STAGE must be at least 1 (instance %m)");
        $finish;
    end
    if (RULE_SLOTS < 1 || RULE_SLOTS > 8) begin
        $error("Error: RULE_SLOTS must be 1 to 8 (instance %m)");
        $finish;
    end
    if (RSP_FIFO_DEPTH < 2) begin
        $error("Error: RSP_FIFO_DEPTH must be at least 2 (instance %m)");
        $finish;
    end
    if (CTL_FIFO_DEPTH < 2) begin
        $error("Error: CTL_FIFO_DEPTH must be at least 2 (instance %m)");
        $finish;
    end
    // the control lane executes exactly the control-port opcodes of the register map
    if (KV_OP_CTL_MASK != ((32'd1 << KV_OP_WRITE_RULE) | (32'd1 << KV_OP_READ_RULE) |
            (32'd1 << KV_OP_CLEAR_COUNTERS) | (32'd1 << KV_OP_READ_COUNTER) |
            (32'd1 << KV_OP_READ_RULE_HITS))) begin
        $error("Error: kv_regs.vh KV_OP_CTL_MASK does not match this engine's control lane (instance %m)");
        $finish;
    end
    if (REQ_W != KV_REQ_W || RSP_W != KV_RSP_W ||
            KV_REQ_OP_W != 5 || KV_REQ_FLAG_W != 1 || KV_REQ_BANK_W != 4 || KV_REQ_INDEX_W != 24 ||
            KV_REQ_BANK2_W != 4 || KV_REQ_INDEX2_W != 24 || KV_REQ_ENTRY_W != 12 || KV_REQ_PRIO_W != 32 ||
            KV_RSP_OP_W != 5 || KV_RSP_STATUS_W != 4 || KV_RSP_FLAG_W != 1 || KV_RSP_ENTRY_W != 12 ||
            KV_RSP_PRIO_W != 32 || KV_RSP_DATA64_W != 64 || NCNT != 11 ||
            KV_RSP_KEY_LSB != KV_RSP_DATA64_LSB + 64 || KV_RSP_MASK_LSB != KV_RSP_KEY_LSB + KEY_W ||
            KV_RSP_VALUE_LSB != KV_RSP_MASK_LSB + KEY_W || KV_RSP_VALUE_LSB + VALUE_W != RSP_W ||
            NUM_COUNTERS != NCNT) begin
        $error("Error: REQ_W/RSP_W overridden, or kv_regs.vh does not match this engine (instance %m)");
        $finish;
    end
end

/*
 * Admission: credits, clear sweep
 */
reg [CNT_W-1:0] pend_reg;          // accepted requests whose response was not yet taken
reg ready_reg;
reg busy_reg;                      // CLEAR_TABLE accepted / sweep running (also after reset)
reg sweep_reg;                     // sweep writing invalid words into every way
reg [ROW_BITS-1:0] sweep_row_reg;

// the request ports never wait for rules: rule operations use the control
// port.  Port 1 (LOOKUP_PORTS = 2) has its own credits (ready1_reg); it is
// taken alone into lane A in a cycle in which port 0 offers nothing (stage 0
// then takes port 1: in_sel1), or as the lane-B half of a pair beside port
// 0's request (accept1_b).
reg [CNT_W-1:0] pend1_reg;         // port 1's accepted requests whose response was not yet taken
reg ready1_reg;
wire in_sel1 = (LOOKUP_PORTS == 2) && !s_axis_req_tvalid;
wire in_ready = ready_reg;
wire [4:0] in0_op = s_axis_req_tdata[RQ_OP +: 5];
wire [4:0] in1_op = s_axis_req1_tdata[RQ_OP +: 5];
// a pair: port 0's GET or LOOKUP taken, port 1's GET beside it into lane B
wire b_block;                      // lane B's RAM read would meet a write (lane_b below)
wire in_pair_ok = (LOOKUP_PORTS == 2) && (in0_op == OP_GET || in0_op == OP_LOOKUP) &&
                  in1_op == OP_GET && !b_block;
wire in_ready1 = (LOOKUP_PORTS == 2) && ready1_reg && (!s_axis_req_tvalid || (in_ready && in_pair_ok));
wire accept0 = s_axis_req_tvalid && in_ready;
wire accept1 = s_axis_req1_tvalid && in_ready1;
wire accept1_a = accept1 && !s_axis_req_tvalid;   // port 1 alone: lane A
/* verilator lint_off UNUSEDSIGNAL */
wire accept1_b = accept1 && s_axis_req_tvalid;    // port 1 in a pair: lane B (unused with one port)
/* verilator lint_on UNUSEDSIGNAL */
wire accept = accept0 || accept1_a;
wire [REQ_W-1:0] in_tdata = in_sel1 ? s_axis_req1_tdata : s_axis_req_tdata;
wire [TAG_W-1:0] in_tuser = in_sel1 ? s_axis_req1_tuser : s_axis_req_tuser;
wire rsp_take = m_axis_rsp_tvalid && m_axis_rsp_tready;
wire rsp1_take = m_axis_rsp1_tvalid && m_axis_rsp1_tready;
wire [4:0] in_op = in_tdata[RQ_OP +: 5];

assign s_axis_req_tready = in_ready;
assign s_axis_req1_tready = in_ready1;

// control port: its own credits; a WRITE_RULE also waits for a free
// kv_rule_match slot (all RULE_SLOTS busy only after a burst of rule writes).
// It never waits for the request port, nor for the clear sweep.
reg [CCNT_W-1:0] c_pend_reg;
reg c_ready_reg;
wire c_in_write_rule = s_axis_ctl_req_tdata[RQ_OP +: 5] == OP_WRITE_RULE;
wire c_in_ready = c_ready_reg && (rm_wr_ready || !c_in_write_rule);
wire c_accept = s_axis_ctl_req_tvalid && c_in_ready;
wire c_rsp_take = m_axis_ctl_rsp_tvalid && m_axis_ctl_rsp_tready;

assign s_axis_ctl_req_tready = c_in_ready;

/*
 * Request pipeline registers, stages 0 .. E (flat vectors, stage s at s*W)
 */
reg [NST-1:0]          p_valid;
reg [NST-1:0]          p_src;          // the request came from port 1
reg [NST*5-1:0]        p_op;
reg [NST-1:0]          p_flag;
// the slot addresses: stage 0 for the decode below, the indexes (their row
// bits) and bank2 up to stage H for the ways' RAM addresses at H+1
localparam AST = H_ST + 1;
reg [3:0]              p_bank;
reg [AST*4-1:0]        p_bank2;
/* verilator lint_off UNUSEDSIGNAL */
reg [AST*24-1:0]       p_index;
reg [AST*24-1:0]       p_index2;
/* verilator lint_on UNUSEDSIGNAL */
// READ_SLOT / WRITE_SLOT / MOVE's slot-address tests, decoded at stage 1 from
// stage 0's fields and carried to execute (stage s at (s-1)*AD_W), so the
// execute stage compares no address: both addresses valid (engine.md §4),
// the banks differ, bank == way w, (bank, index) == stash entry i
localparam AD_OK1 = 0;
localparam AD_OK2 = 1;
localparam AD_DIFF = 2;
localparam AD_W1 = 3;
localparam AD_W2 = AD_W1 + WAYS;
localparam AD_S1 = AD_W2 + WAYS;
localparam AD_S2 = AD_S1 + STASH_N;
localparam AD_W = AD_S2 + STASH_N;
reg [(NST-1)*AD_W-1:0] p_adec;
reg [NST*KEY_W-1:0]    p_key;
reg [NST*VALUE_W-1:0]  p_value;
reg [NST*TAG_W-1:0]    p_tag;
// per-way bank address, valid from stage H+1
reg [NST*WAYS*ROW_BITS-1:0] p_addr;
// rule result: hit, winning index, its priority (from stage V+1), its value (from V+2)
reg [NST-1:0]          p_rhit;
reg [NST*RIDX_W-1:0]   p_ridx;
reg [NST*PRIO_W-1:0]   p_rprio;
reg [NST*VALUE_W-1:0]  p_rvalue;

// control lane: the same stages, one control request per stage (op,
// flag, index, entry, prio, key, mask, value, tag); from V+2 a READ_RULE
// carries the entry read back in flag/key/mask/prio/value
reg [CNST-1:0]         c_valid;
reg [CNST*5-1:0]       c_op;
reg [CNST-1:0]         c_flag;
reg [CNST*24-1:0]      c_index;
reg [CNST*12-1:0]      c_entry;
reg [CNST*32-1:0]      c_prio;
reg [CNST*KEY_W-1:0]   c_key;
reg [CNST*KEY_W-1:0]   c_mask;
reg [CNST*VALUE_W-1:0] c_value;
reg [CNST*TAG_W-1:0]   c_tag;
reg [CNST-1:0]         c_bad;          // refused (engine.md §5.6), decided on acceptance
reg                    c_rule_wr0;     // stage 0 holds a WRITE_RULE that is not refused

// stage-0 views
wire              s0_valid = p_valid[0];
wire [KEY_W-1:0]  s0_key = p_key[0 +: KEY_W];

// WRITE_RULE acceptance test (engine.md §5.6), same function at every stage
function rule_write_ok(input [11:0] entry, input [31:0] prio);
    begin
        rule_write_ok = ({1'b0, entry} < RULES_C) && ((prio >> PRIO_W) == 32'd0);
    end
endfunction

/*
 * Hash unit: rows of every way at stage H
 */
wire [WAYS*ROW_BITS-1:0] hash_rows;
wire hash_valid_unused;
wire hash_user_unused;

kv_h3_hash #(
    .KEY_W(KEY_W),
    .WAYS(WAYS),
    .ROW_BITS(ROW_BITS),
    .HASH_SEED(HASH_SEED),
    .STAGES(HASH_STAGES),
    .USER_W(1)
)
hash_inst (
    .clk(clk),
    .rst(rst),
    .s_valid(s0_valid),
    .s_key(s0_key),
    .s_user(1'b0),
    .m_valid(hash_valid_unused),
    .m_rows(hash_rows),
    .m_user(hash_user_unused)
);

/*
 * Rules: match from stage 0 (hit vector at M_LAT), priority tree to stage V,
 * rule RAM (everything READ_RULE returns) at V, hit counter RAM read at E-1
 */
wire                 rm_wr_ready;      // kv_rule_match takes a WRITE_RULE next cycle
wire                 tree_valid;
wire [RIDX_W-1:0]    tree_idx;
wire [PRIO_W-1:0]    tree_prio;
wire [RULE_W-1:0]    rule_q;           // rule RAM output (control lane), stage V+1
reg                  rule_written_q;   // that entry was written since reset, stage V+1
wire [63:0]          rh_q;             // rule hit counter RAM output (request lane), stage E

// control lane at stage V / V+1: WRITE_RULE writes the rule RAM at V (read
// there by READ_RULE) and the rule value RAM at V+1 (read by LOOKUPs at V,
// forwarded when both meet in one cycle)
wire [4:0]           cv_op = c_op[V_ST*5 +: 5];
wire [RIDX_W-1:0]    cv_entry = c_entry[V_ST*12 +: RIDX_W];
wire                 cv_rule_wr = c_valid[V_ST] && cv_op == OP_WRITE_RULE && !c_bad[V_ST];
wire [RIDX_W-1:0]    cv1_entry = c_entry[(V_ST+1)*12 +: RIDX_W];
wire                 cv1_rule_wr = c_valid[V_ST+1] && c_op[(V_ST+1)*5 +: 5] == OP_WRITE_RULE &&
                                   !c_bad[V_ST+1];
wire [VALUE_W-1:0]   rval_q;           // rule value RAM output (LOOKUP winner), stage V+1
reg                  rval_fwd_q;       // ... replaced by the control lane's write of that cycle
reg  [VALUE_W-1:0]   rval_fwd_data_q;

// rule hit counters: two copies of one RAM (same writes), read at E-1 by the
// request lane (a LOOKUP's winner) and by the control lane (the request's
// entry), written at E+1 from the write window
localparam X_ST = E_ST - 1;
wire [RIDX_W-1:0]    x_rh_addr = p_ridx[X_ST*RIDX_W +: RIDX_W];
wire [RIDX_W-1:0]    cx_rh_addr = c_entry[E_ST*12 +: RIDX_W];
reg  [RULES_P-1:0]   rh_fresh;         // rule_hit[e] is in the RAM (else 0: cleared since)
reg                  rh_fresh_q;       // fresh bit of the entry read, stage E
reg  [RIDX_W-1:0]    rh_addr_q;        // entry read, stage E
reg                  c_rh_fresh_q;     // the same for the control lane
reg  [RIDX_W-1:0]    c_rh_addr_q;
wire [63:0]          c_rh_q;           // control lane's copy of the RAM, stage E
// write window: [0] is written to the RAM in this cycle, [1] was in the last
reg  [1:0]           rhw_en;
reg  [2*RIDX_W-1:0]  rhw_addr;
reg  [2*64-1:0]      rhw_data;

generate
    if (RULES > 0) begin : rules
        wire [RULES-1:0] rm_hit;
        wire [RULES*PRIO_W-1:0] rm_prio;
        wire [RULES-1:0] rm_hit1_unused;
        wire rm_busy_unused;
        reg [RULES_P-1:0] written;

        // lookups from the request lane, writes from the control lane: a
        // WRITE_RULE and the LOOKUP of the same cycle are taken lookup first
        kv_rule_match #(
            .KEY_W(KEY_W),
            .RULES(RULES),
            .PRIO_W(PRIO_W),
            .ENTRY_W(RIDX_W),
            .SLOTS(RULE_SLOTS)
        )
        match_inst (
            .clk(clk),
            .rst(rst),
            .lookup_key(s0_key),
            .hit(rm_hit),
            .lookup1_key({KEY_W{1'b0}}),
            .hit1(rm_hit1_unused),
            .prio(rm_prio),
            // every accepted WRITE_RULE (refused ones too: an upper bound) is a write next cycle
            .wr_next(c_accept && c_in_write_rule),
            .wr_en(c_rule_wr0),
            .wr_entry(c_entry[0 +: RIDX_W]),
            .wr_valid(c_flag[0]),
            .wr_match(c_key[0 +: KEY_W]),
            .wr_mask(c_mask[0 +: KEY_W]),
            .wr_prio(c_prio[0 +: PRIO_W]),
            .wr_ready(rm_wr_ready),
            .rewrite_busy(rm_busy_unused)
        );

        kv_prio_tree #(
            .N(RULES),
            .PRIO_W(PRIO_W),
            .IDX_W(RIDX_W),
            .LEVELS_PER_STAGE(TREE_LEVELS_PER_STAGE)
        )
        tree_inst (
            .clk(clk),
            .in_valid(rm_hit),
            .in_prio(rm_prio),
            .out_valid(tree_valid),
            .out_idx(tree_idx),
            .out_prio(tree_prio)
        );

        // rule entries as READ_RULE returns them: written by WRITE_RULE and
        // read by READ_RULE at stage V of the control lane (so in control
        // order); `written` marks entries written since reset (the RAM
        // itself is not reset)
        wire [RULE_W-1:0] rule_ram_rd1_unused;

        kv_bank_ram #(
            .WIDTH(RULE_W),
            .ADDR_W(RIDX_W),
            .RD_LAT(1)
        )
        rule_ram_inst (
            .clk(clk),
            .wr_en(cv_rule_wr),
            .wr_addr(cv_entry),
            .wr_data({c_flag[V_ST], c_key[V_ST*KEY_W +: KEY_W], c_mask[V_ST*KEY_W +: KEY_W],
                      c_prio[V_ST*32 +: PRIO_W], c_value[V_ST*VALUE_W +: VALUE_W]}),
            .rd_addr(cv_entry),
            .rd_data(rule_q),
            .rd1_addr({RIDX_W{1'b0}}),
            .rd1_data(rule_ram_rd1_unused)
        );

        // rule values for LOOKUPs: written at control stage V+1, read at
        // request stage V; a write in the cycle of the read is forwarded
        // (that write belongs to a WRITE_RULE accepted before the LOOKUP)
        wire [VALUE_W-1:0] value_ram_rd1_unused;

        kv_bank_ram #(
            .WIDTH(VALUE_W),
            .ADDR_W(RIDX_W),
            .RD_LAT(1)
        )
        value_ram_inst (
            .clk(clk),
            .wr_en(cv1_rule_wr),
            .wr_addr(cv1_entry),
            .wr_data(c_value[(V_ST+1)*VALUE_W +: VALUE_W]),
            .rd_addr(tree_idx),
            .rd_data(rval_q),
            .rd1_addr({RIDX_W{1'b0}}),
            .rd1_data(value_ram_rd1_unused)
        );

        always @(posedge clk) begin
            rule_written_q <= written[cv_entry];
            if (cv_rule_wr) begin
                written[cv_entry] <= 1'b1;
            end
            rval_fwd_q <= cv1_rule_wr && cv1_entry == tree_idx;
            rval_fwd_data_q <= c_value[(V_ST+1)*VALUE_W +: VALUE_W];
            if (rst) begin
                written <= {RULES_P{1'b0}};
            end
        end

        // rule hit counters (64 bits per entry), one copy per reading lane
        wire [63:0] hits_ram_rd1_unused;

        kv_bank_ram #(
            .WIDTH(64),
            .ADDR_W(RIDX_W),
            .RD_LAT(1)
        )
        hits_ram_inst (
            .clk(clk),
            .wr_en(rhw_en[0]),
            .wr_addr(rhw_addr[0 +: RIDX_W]),
            .wr_data(rhw_data[0 +: 64]),
            .rd_addr(x_rh_addr),
            .rd_data(rh_q),
            .rd1_addr({RIDX_W{1'b0}}),
            .rd1_data(hits_ram_rd1_unused)
        );

        wire [63:0] hits_ctl_ram_rd1_unused;

        kv_bank_ram #(
            .WIDTH(64),
            .ADDR_W(RIDX_W),
            .RD_LAT(1)
        )
        hits_ctl_ram_inst (
            .clk(clk),
            .wr_en(rhw_en[0]),
            .wr_addr(rhw_addr[0 +: RIDX_W]),
            .wr_data(rhw_data[0 +: 64]),
            .rd_addr(cx_rh_addr),
            .rd_data(c_rh_q),
            .rd1_addr({RIDX_W{1'b0}}),
            .rd1_data(hits_ctl_ram_rd1_unused)
        );
    end else begin : no_rules
        assign rm_wr_ready = 1'b1;
        assign tree_valid = 1'b0;
        assign tree_idx = {RIDX_W{1'b0}};
        assign tree_prio = {PRIO_W{1'b0}};
        assign rule_q = {RULE_W{1'b0}};
        assign rval_q = {VALUE_W{1'b0}};
        assign rh_q = 64'd0;
        assign c_rh_q = 64'd0;
        always @(posedge clk) begin
            rule_written_q <= 1'b0;
            rval_fwd_q <= 1'b0;
            rval_fwd_data_q <= {VALUE_W{1'b0}};
        end
    end
endgenerate

/*
 * Bank RAMs: read at stage A, written from the newest forwarding-window entry
 */
// forwarding window: entry 0 is the write presented to the RAMs this cycle
// (made by the request executed last cycle), entry j the one before that
reg [WIN*WAYS-1:0]          win_we;
reg [WIN*WAYS*ROW_BITS-1:0] win_addr;
reg [WIN*WAYS*ENT_W-1:0]    win_data;

wire [WAYS*ENT_W-1:0] ram_q;
wire [WAYS*ENT_W-1:0] ram1_q;                 // port B reads (lane B)
wire [WAYS*ROW_BITS-1:0] b_ram_addr;          // lane B's rows at stage A

genvar gw;

generate
    for (gw = 0; gw < WAYS; gw = gw + 1) begin : bank
        kv_bank_ram #(
            .WIDTH(ENT_W),
            .ADDR_W(ROW_BITS),
            .RD_LAT(RAM_LAT),
            .RD_PORTS(LOOKUP_PORTS)
        )
        ram_inst (
            .clk(clk),
            .wr_en(sweep_reg || win_we[gw]),
            .wr_addr(sweep_reg ? sweep_row_reg : win_addr[gw*ROW_BITS +: ROW_BITS]),
            .wr_data(sweep_reg ? {ENT_W{1'b0}} : win_data[gw*ENT_W +: ENT_W]),
            .rd_addr(p_addr[(A_ST*WAYS + gw)*ROW_BITS +: ROW_BITS]),
            .rd_data(ram_q[gw*ENT_W +: ENT_W]),
            .rd1_addr(b_ram_addr[gw*ROW_BITS +: ROW_BITS]),
            .rd1_data(ram1_q[gw*ENT_W +: ENT_W])
        );
    end
endgenerate

/*
 * Stash, counters, rule hit counters (registers, updated at execute)
 */
reg [STASH_N-1:0]          st_valid;
reg [STASH_N*KEY_W-1:0]    st_key;
reg [STASH_N*VALUE_W-1:0]  st_value;
reg [NCNT*64-1:0]          counters;
// The increments of a cycle's executes wait one cycle here before they are
// added, so no decision of the execute stage reaches a 64-bit adder: the
// counters after the requests executed so far are counters + cnt_pend
// (cmd_errors may count a refusal of each lane in one cycle: two bits).
reg [NCNT-1:0]             cnt_pend;
wire [NCNT-1:0]            cnt_pend_b;      // lane B's (GETs: lookups, exact_hits, misses)
reg [1:0]                  cmd_pend;
// occupancy's change waits the same way: cleared (CLEAR_TABLE), then + delta
// (an insert, a WRITE_SLOT) - copies (the slots a DEL empties; counted, not
// subtracted, at execute)
reg                        occ_clear_pend;
reg [1:0]                  occ_delta_pend;
reg [6:0]                  occ_copies_pend;
wire [7:0]                 occ_change = {{6{occ_delta_pend[1]}}, occ_delta_pend} - {1'b0, occ_copies_pend};
wire [63:0]                occ_now = (occ_clear_pend ? 64'd0 : counters[C_OCCUPANCY*64 +: 64]) +
                                     {{56{occ_change[7]}}, occ_change};
assign stat_counters = counters;

/*
 * Compare (stage K = E-1): each way's word after forwarding, compared with
 * the key, and the stash compared with the key.  What it cannot see is the
 * write of the request one stage ahead (executing in this cycle): that is
 * folded in at execute from the forwarding window's newest entry, with the
 * key equality and row matches worked out here.  That request's write stores
 * its own key (SET, DEL, WRITE_SLOT) because a MOVE, which stores another
 * slot's key, is never followed by a request in the next cycle (admission).
 */
wire [KEY_W-1:0]         k_key = p_key[K_ST*KEY_W +: KEY_W];
wire [WAYS*ROW_BITS-1:0] k_addr = p_addr[K_ST*WAYS*ROW_BITS +: WAYS*ROW_BITS];
// the window entries' rows against each way's row of the request at K,
// compared a cycle ahead (win_addr and the addresses are known then)
wire [WAYS*ROW_BITS-1:0] k1_addr = p_addr[(K_ST-1)*WAYS*ROW_BITS +: WAYS*ROW_BITS];
reg  [WIN*WAYS-1:0]      k_row_match;

reg [WAYS*ENT_W-1:0]     k_fwd;         // way words after forwarding (all but the write at E)
reg [WAYS-1:0]           k_way_hit;
reg [STASH_N-1:0]        k_st_hit;

integer kw, kj, ki;

always @* begin
    k_fwd = ram_q;
    for (kw = 0; kw < WAYS; kw = kw + 1) begin
        for (kj = WIN-1; kj >= 0; kj = kj - 1) begin
            if (win_we[kj*WAYS + kw] && k_row_match[kj*WAYS + kw]) begin
                k_fwd[kw*ENT_W +: ENT_W] = win_data[(kj*WAYS + kw)*ENT_W +: ENT_W];
            end
        end
    end
    for (kw = 0; kw < WAYS; kw = kw + 1) begin
        k_way_hit[kw] = k_fwd[kw*ENT_W + ENT_W - 1] && k_fwd[kw*ENT_W + VALUE_W +: KEY_W] == k_key;
    end
    for (ki = 0; ki < STASH_N; ki = ki + 1) begin
        k_st_hit[ki] = (STASH > 0) && st_valid[ki] && st_key[ki*KEY_W +: KEY_W] == k_key;
    end
end

// stage K -> E
reg [WAYS*ENT_W-1:0]     e_fwd_k;
reg [WAYS-1:0]           e_way_hit_k;
reg [STASH_N-1:0]        e_st_hit_k;
reg                      e_key_eq_prev;  // key == the key of the request executed just before
reg [WAYS-1:0]           e_row_eq_prev;  // way row == that request's row of the way
// that request's stash writes (its way writes are the window's entry 0)
reg [STASH_N-1:0]        prev_st_we;
reg [STASH_N-1:0]        prev_st_wvalid;

/*
 * Execute (stage E)
 */
wire              e_valid = p_valid[E_ST];
wire              e_src = p_src[E_ST];
wire [4:0]        e_op = p_op[E_ST*5 +: 5];
wire              e_flag = p_flag[E_ST];
wire [AD_W-1:0]   e_adec = p_adec[(E_ST-1)*AD_W +: AD_W];
wire [KEY_W-1:0]  e_key = p_key[E_ST*KEY_W +: KEY_W];
wire [VALUE_W-1:0] e_value = p_value[E_ST*VALUE_W +: VALUE_W];
wire [TAG_W-1:0]  e_tag = p_tag[E_ST*TAG_W +: TAG_W];
wire [WAYS*ROW_BITS-1:0] e_addr = p_addr[E_ST*WAYS*ROW_BITS +: WAYS*ROW_BITS];
wire              e_rhit = p_rhit[E_ST];
wire [RIDX_W-1:0] e_ridx = p_ridx[E_ST*RIDX_W +: RIDX_W];
wire [PRIO_W-1:0] e_rprio = p_rprio[E_ST*PRIO_W +: PRIO_W];
wire [VALUE_W-1:0] e_rvalue = p_rvalue[E_ST*VALUE_W +: VALUE_W];

// way words after forwarding
reg [WAYS*ENT_W-1:0] fwd;

// decisions
reg [WAYS-1:0]          wr_we;          // way writes (at the way's address e_addr)
reg [WAYS-1:0]          wr_valid;       // the valid bit each way write stores
reg [WAYS*ENT_W-1:0]    wr_data;
reg [STASH_N-1:0]       st_we;
reg [STASH_N-1:0]       st_wvalid;      // the valid bit each stash write stores
// Every write of one request stores the same key and (but for DEL, which keeps each
// slot's value) the same value: e_key and e_value, or for MOVE the source slot's. A slot
// that keeps its key holds that key already (a hit, or MOVE's source), so one key and one
// value word serve every way and stash entry, and a stash entry's registers only need
// their write enables (no per-entry data multiplexer).
reg [KEY_W-1:0]         new_key;
reg [VALUE_W-1:0]       new_value;
reg [NCNT-1:0]          cnt_inc;        // counters to increment by one
reg                     occ_clear;      // occupancy <= 0 (CLEAR_TABLE) ...
reg [1:0]               occ_delta;      // ... then += occ_delta (two's complement, -1 to 1)
reg [6:0]               occ_copies;     // ... and -= occ_copies (a DEL's copies)
reg                     do_clear_table;
reg                     rh_inc;         // rule_hit[e_ridx] += 1
reg  [63:0]             rh_base;        // rule_hit[] of the entry read at E-1, forwarded
reg                     rh_we;          // rule hit counter write (into the window)
reg  [RIDX_W-1:0]       rh_waddr;
reg  [63:0]             rh_wdata;

// response fields
reg [3:0]         r_status;
reg               r_flag;
reg [11:0]        r_entry;
reg [31:0]        r_prio;
reg [KEY_W-1:0]   r_key;
reg [VALUE_W-1:0] r_value;

// work variables of the execute logic
reg [WAYS-1:0]    way_hit;
reg [STASH_N-1:0] st_hit;
reg               found;
reg [VALUE_W-1:0] found_value;
reg               free_way_found;
reg [3:0]         free_way;
reg               free_st_found;
reg [6:0]         free_st;
reg               addr1_ok, addr2_ok;
reg [ENT_W-1:0]   slot1, slot2;     // contents of (bank, index) and (bank2, index2)
reg [6:0]         copies;

integer w, i;

// slot address check (engine.md §4)
function addr_ok(input [3:0] f_bank, input [23:0] f_index);
    begin
        addr_ok = (f_bank < WAYS_C && {1'b0, f_index} < ROWS_C) ||
                  (f_bank == WAYS_C && {1'b0, f_index} < STASH_C);
    end
endfunction

// the AD_* tests of a request's two slot addresses
function [AD_W-1:0] addr_decode(input [3:0] f_bank, input [23:0] f_index,
                                input [3:0] f_bank2, input [23:0] f_index2);
    integer k;
    begin
        addr_decode = {AD_W{1'b0}};
        addr_decode[AD_OK1] = addr_ok(f_bank, f_index);
        addr_decode[AD_OK2] = addr_ok(f_bank2, f_index2);
        addr_decode[AD_DIFF] = f_bank != f_bank2;
        for (k = 0; k < WAYS; k = k + 1) begin
            addr_decode[AD_W1 + k] = f_bank == k[3:0];
            addr_decode[AD_W2 + k] = f_bank2 == k[3:0];
        end
        for (k = 0; k < STASH_N; k = k + 1) begin
            addr_decode[AD_S1 + k] = f_bank == WAYS_C && f_index == k[23:0];
            addr_decode[AD_S2 + k] = f_bank2 == WAYS_C && f_index2 == k[23:0];
        end
    end
endfunction

always @* begin
    // the compare stage's words and hits, with the write of the request
    // executed last cycle (window entry 0, stash writes) folded in; the stash
    // registers hold that write already
    for (w = 0; w < WAYS; w = w + 1) begin
        if (win_we[w] && e_row_eq_prev[w]) begin
            fwd[w*ENT_W +: ENT_W] = win_data[w*ENT_W +: ENT_W];
            way_hit[w] = win_data[w*ENT_W + ENT_W - 1] && e_key_eq_prev;
        end else begin
            fwd[w*ENT_W +: ENT_W] = e_fwd_k[w*ENT_W +: ENT_W];
            way_hit[w] = e_way_hit_k[w];
        end
    end

    // exact search (engine.md §5.1): candidate slots then stash
    for (i = 0; i < STASH_N; i = i + 1) begin
        st_hit[i] = (STASH > 0) &&
                    (prev_st_we[i] ? (prev_st_wvalid[i] && e_key_eq_prev) : e_st_hit_k[i]);
    end
    found = 1'b0;
    found_value = {VALUE_W{1'b0}};
    for (i = STASH_N-1; i >= 0; i = i - 1) begin
        if (st_hit[i]) begin
            found = 1'b1;
            found_value = st_value[i*VALUE_W +: VALUE_W];
        end
    end
    for (w = WAYS-1; w >= 0; w = w - 1) begin
        if (way_hit[w]) begin
            found = 1'b1;
            found_value = fwd[w*ENT_W +: VALUE_W];
        end
    end
    copies = 7'd0;
    for (w = 0; w < WAYS; w = w + 1) begin
        copies = copies + {6'd0, way_hit[w]};
    end
    for (i = 0; i < STASH_N; i = i + 1) begin
        copies = copies + {6'd0, st_hit[i]};
    end
    free_way_found = 1'b0;
    free_way = 4'd0;
    for (w = WAYS-1; w >= 0; w = w - 1) begin
        if (!fwd[w*ENT_W + ENT_W - 1]) begin
            free_way_found = 1'b1;
            free_way = w[3:0];
        end
    end
    free_st_found = 1'b0;
    free_st = 7'd0;
    for (i = STASH_N-1; i >= 0; i = i - 1) begin
        if (STASH > 0 && !st_valid[i]) begin
            free_st_found = 1'b1;
            free_st = i[6:0];
        end
    end

    // control addresses and the slots they name
    addr1_ok = e_adec[AD_OK1];
    addr2_ok = e_adec[AD_OK2];
    slot1 = {ENT_W{1'b0}};
    slot2 = {ENT_W{1'b0}};
    for (w = 0; w < WAYS; w = w + 1) begin
        if (e_adec[AD_W1 + w]) begin
            slot1 = fwd[w*ENT_W +: ENT_W];
        end
        if (e_adec[AD_W2 + w]) begin
            slot2 = fwd[w*ENT_W +: ENT_W];
        end
    end
    for (i = 0; i < STASH_N; i = i + 1) begin
        if (e_adec[AD_S1 + i]) begin
            slot1 = {st_valid[i], st_key[i*KEY_W +: KEY_W], st_value[i*VALUE_W +: VALUE_W]};
        end
        if (e_adec[AD_S2 + i]) begin
            slot2 = {st_valid[i], st_key[i*KEY_W +: KEY_W], st_value[i*VALUE_W +: VALUE_W]};
        end
    end

    // defaults: nothing happens
    wr_we = {WAYS{1'b0}};
    wr_valid = {WAYS{1'b0}};
    st_we = {STASH_N{1'b0}};
    st_wvalid = {STASH_N{1'b0}};
    new_key = (e_op == OP_MOVE) ? slot1[VALUE_W +: KEY_W] : e_key;
    new_value = (e_op == OP_MOVE) ? slot1[0 +: VALUE_W] : e_value;
    cnt_inc = {NCNT{1'b0}};
    occ_clear = 1'b0;
    occ_delta = 2'd0;
    occ_copies = 7'd0;
    do_clear_table = 1'b0;
    rh_inc = 1'b0;

    // rule hit counter of the entry read at E-1: the newest write still in the
    // window, else the RAM word if written since the last CLEAR_COUNTERS, else 0
    rh_base = rh_fresh_q ? rh_q : 64'd0;
    if (rhw_en[1] && rhw_addr[RIDX_W +: RIDX_W] == rh_addr_q) begin
        rh_base = rhw_data[64 +: 64];
    end
    if (rhw_en[0] && rhw_addr[0 +: RIDX_W] == rh_addr_q) begin
        rh_base = rhw_data[0 +: 64];
    end
    // cleared (CLEAR_COUNTERS) or zeroed (WRITE_RULE) by the control lane in
    // this cycle: that control request comes first
    if (do_clear_counters || (c_rh_zero && ce_entry[RIDX_W-1:0] == rh_addr_q)) begin
        rh_base = 64'd0;
    end

    r_status = ST_OK;
    r_flag = 1'b0;
    r_entry = 12'd0;
    r_prio = 32'd0;
    r_key = {KEY_W{1'b0}};
    r_value = {VALUE_W{1'b0}};

    case (e_op)
        OP_GET, OP_LOOKUP: begin
            cnt_inc[C_LOOKUPS] = 1'b1;
            if (found) begin
                r_status = ST_EXACT;
                r_value = found_value;
                cnt_inc[C_EXACT_HITS] = 1'b1;
            end else if (e_op == OP_LOOKUP && e_rhit) begin
                r_status = ST_RULE;
                r_value = e_rvalue;
                r_entry = {{(12-RIDX_W){1'b0}}, e_ridx};
                r_prio = {{(32-PRIO_W){1'b0}}, e_rprio};
                cnt_inc[C_RULE_HITS] = 1'b1;
                rh_inc = 1'b1;
            end else begin
                r_status = ST_MISS;
                cnt_inc[C_MISSES] = 1'b1;
            end
        end
        OP_SET: begin
            if (found) begin
                // every copy takes the value (engine.md §5.4 step 1)
                for (w = 0; w < WAYS; w = w + 1) begin
                    if (way_hit[w]) begin
                        wr_we[w] = 1'b1;
                        wr_valid[w] = 1'b1;
                    end
                end
                for (i = 0; i < STASH_N; i = i + 1) begin
                    if (st_hit[i]) begin
                        st_we[i] = 1'b1;
                        st_wvalid[i] = 1'b1;
                    end
                end
                r_status = ST_UPDATED;
                cnt_inc[C_UPDATES] = 1'b1;
            end else if (free_way_found) begin
                for (w = 0; w < WAYS; w = w + 1) begin
                    if (free_way == w[3:0]) begin
                        wr_we[w] = 1'b1;
                        wr_valid[w] = 1'b1;
                    end
                end
                r_status = ST_INSERTED;
                cnt_inc[C_INSERTS] = 1'b1;
                occ_delta = 2'd1;
            end else if (free_st_found) begin
                for (i = 0; i < STASH_N; i = i + 1) begin
                    if (free_st == i[6:0]) begin
                        st_we[i] = 1'b1;
                        st_wvalid[i] = 1'b1;
                    end
                end
                r_status = ST_INSERTED_STASH;
                cnt_inc[C_INSERTS] = 1'b1;
                occ_delta = 2'd1;
            end else begin
                r_status = ST_FULL;
                cnt_inc[C_INSERT_FAILURES] = 1'b1;
            end
        end
        OP_DEL: begin
            if (found) begin
                for (w = 0; w < WAYS; w = w + 1) begin
                    if (way_hit[w]) begin
                        wr_we[w] = 1'b1;
                    end
                end
                for (i = 0; i < STASH_N; i = i + 1) begin
                    if (st_hit[i]) begin
                        st_we[i] = 1'b1;
                    end
                end
                r_status = ST_DELETED;
                cnt_inc[C_DELETES] = 1'b1;
                occ_copies = copies;
            end else begin
                r_status = ST_NOT_FOUND;
                cnt_inc[C_DELETE_MISSES] = 1'b1;
            end
        end
        OP_READ_SLOT: begin
            if (addr1_ok) begin
                r_flag = slot1[ENT_W-1];
                r_key = slot1[VALUE_W +: KEY_W];
                r_value = slot1[0 +: VALUE_W];
            end else begin
                r_status = ST_REFUSED;
            end
        end
        OP_WRITE_SLOT: begin
            if (addr1_ok) begin
                for (w = 0; w < WAYS; w = w + 1) begin
                    if (e_adec[AD_W1 + w]) begin
                        wr_we[w] = 1'b1;
                        wr_valid[w] = e_flag;
                    end
                end
                for (i = 0; i < STASH_N; i = i + 1) begin
                    if (e_adec[AD_S1 + i]) begin
                        st_we[i] = 1'b1;
                        st_wvalid[i] = e_flag;
                    end
                end
                occ_delta = {1'b0, e_flag} - {1'b0, slot1[ENT_W-1]};
            end else begin
                r_status = ST_REFUSED;
            end
        end
        OP_MOVE: begin
            if (addr1_ok && addr2_ok && e_adec[AD_DIFF] && slot1[ENT_W-1] && !slot2[ENT_W-1]) begin
                for (w = 0; w < WAYS; w = w + 1) begin
                    if (e_adec[AD_W1 + w]) begin
                        wr_we[w] = 1'b1;
                    end
                    if (e_adec[AD_W2 + w]) begin
                        wr_we[w] = 1'b1;
                        wr_valid[w] = 1'b1;
                    end
                end
                for (i = 0; i < STASH_N; i = i + 1) begin
                    if (e_adec[AD_S1 + i]) begin
                        st_we[i] = 1'b1;
                    end
                    if (e_adec[AD_S2 + i]) begin
                        st_we[i] = 1'b1;
                        st_wvalid[i] = 1'b1;
                    end
                end
            end else begin
                r_status = ST_REFUSED;
            end
        end
        OP_CLEAR_TABLE: begin
            do_clear_table = 1'b1;
            occ_clear = 1'b1;
        end
        default: begin
            // unknown opcodes and the control port's (KV_OP_CTL_MASK)
            r_status = ST_REFUSED;
        end
    endcase

    if (r_status == ST_REFUSED && e_op != OP_SET && e_op != OP_DEL &&
            e_op != OP_GET && e_op != OP_LOOKUP) begin
        cnt_inc[C_CMD_ERRORS] = 1'b1;
    end

    // a DEL keeps each way's value, every other write stores new_value
    for (w = 0; w < WAYS; w = w + 1) begin
        wr_data[w*ENT_W +: ENT_W] = {wr_valid[w], new_key,
                                     (e_op == OP_DEL) ? fwd[w*ENT_W +: VALUE_W] : new_value};
    end

    if (!e_valid) begin
        wr_we = {WAYS{1'b0}};
        st_we = {STASH_N{1'b0}};
        cnt_inc = {NCNT{1'b0}};
        occ_clear = 1'b0;
        occ_delta = 2'd0;
        occ_copies = 7'd0;
        do_clear_table = 1'b0;
        rh_inc = 1'b0;
    end

    rh_we = rh_inc;
    rh_waddr = e_ridx;
    rh_wdata = rh_base + 64'd1;
end

/*
 * Control lane execute (stage E+1 of the control lane).  A control request
 * accepted in cycle t executes in the cycle in which the request lane
 * executes the request accepted in t+1, and goes first: it reads the
 * counters and rule hit counts left by the requests accepted up to t (all
 * in registers and the forwarding window, no path from the request lane's
 * execute), and the request lane's execute of the same cycle applies its
 * updates after this one's clears (engine.md §5.7).
 */
wire              ce_valid = c_valid[CE_ST];
wire [4:0]        ce_op = c_op[CE_ST*5 +: 5];
wire [11:0]       ce_entry = c_entry[CE_ST*12 +: 12];
wire [23:0]       ce_index = c_index[CE_ST*24 +: 24];
wire [TAG_W-1:0]  ce_tag = c_tag[CE_ST*TAG_W +: TAG_W];
wire              ce_bad = c_bad[CE_ST];

reg               do_clear_counters;
reg               c_rh_zero;      // rule_hit[ce_entry] <= 0 (WRITE_RULE)
reg               c_cmd_error;    // refused: cmd_errors += 1
reg  [63:0]       c_rh_base;      // rule_hit[] of the entry read at control stage E, forwarded
reg  [3:0]        c_status;
reg  [63:0]       c_data64;
reg  [63:0]       cnt_now;        // counter ce_index

integer cc;

always @* begin
    do_clear_counters = 1'b0;
    c_rh_zero = 1'b0;
    c_status = ST_OK;
    c_data64 = 64'd0;

    // rule hit count of the entry read one stage earlier: the newest window
    // write, else the RAM word if fresh, else 0 (as the request lane's)
    c_rh_base = c_rh_fresh_q ? c_rh_q : 64'd0;
    if (rhw_en[1] && rhw_addr[RIDX_W +: RIDX_W] == c_rh_addr_q) begin
        c_rh_base = rhw_data[64 +: 64];
    end
    if (rhw_en[0] && rhw_addr[0 +: RIDX_W] == c_rh_addr_q) begin
        c_rh_base = rhw_data[0 +: 64];
    end

    cnt_now = 64'd0;
    for (cc = 0; cc < NCNT; cc = cc + 1) begin
        if (ce_index == cc[23:0]) begin
            if (cc == C_OCCUPANCY) begin
                cnt_now = occ_now;
            end else begin
                cnt_now = counters[cc*64 +: 64] +
                          (cc == C_CMD_ERRORS ? {62'd0, cmd_pend} :
                           {62'd0, {1'b0, cnt_pend[cc]} + {1'b0, cnt_pend_b[cc]}});
            end
        end
    end

    // WRITE_RULE: matcher written at stage 0, rule RAM at V, value RAM at
    // V+1, its rule_hit zeroed here; READ_RULE: flag/key/mask/value were
    // replaced at V+2 by the rule RAM word
    if (ce_bad) begin
        c_status = ST_REFUSED;
    end else begin
        case (ce_op)
            OP_WRITE_RULE: c_rh_zero = 1'b1;
            OP_CLEAR_COUNTERS: do_clear_counters = 1'b1;
            OP_READ_COUNTER: c_data64 = cnt_now;
            OP_READ_RULE_HITS: c_data64 = c_rh_base;
            default: c_data64 = 64'd0;
        endcase
    end
    c_cmd_error = ce_bad;

    if (!ce_valid) begin
        do_clear_counters = 1'b0;
        c_rh_zero = 1'b0;
        c_cmd_error = 1'b0;
    end
end

/*
 * Response FIFO
 */
reg [FIFO_W-1:0]  fifo_mem [0:RSP_FIFO_DEPTH-1];
reg [FIFO_AW-1:0] fifo_wr_ptr;
reg [FIFO_AW-1:0] fifo_rd_ptr;
reg [CNT_W-1:0]   fifo_count;

reg [RS_DATA64-1:0] rsp_low;   // the response fields below data64

always @* begin
    rsp_low = {RS_DATA64{1'b0}};
    rsp_low[RS_OP +: 5] = e_op;
    rsp_low[RS_STATUS +: 4] = r_status;
    rsp_low[RS_FLAG] = r_flag;
    rsp_low[RS_ENTRY +: 12] = r_entry;
    rsp_low[RS_PRIO +: 32] = r_prio;
end
wire [FIFO_W-1:0] fifo_out = fifo_mem[fifo_rd_ptr];

assign m_axis_rsp_tvalid = fifo_count != 0;
assign m_axis_rsp_tdata = {fifo_out[RS_DATA64+KEY_W +: VALUE_W], {KEY_W{1'b0}},
                          fifo_out[RS_DATA64 +: KEY_W], 64'd0, fifo_out[0 +: RS_DATA64]};
assign m_axis_rsp_tuser = fifo_out[FIFO_W-TAG_W +: TAG_W];

wire fifo_we = e_valid && !e_src;

always @(posedge clk) begin
    if (fifo_we) begin
        fifo_mem[fifo_wr_ptr] <= {e_tag, r_value, r_key, rsp_low};
    end
end

function [FIFO_AW-1:0] ptr_inc(input [FIFO_AW-1:0] p);
    begin
        if ({{(32-FIFO_AW){1'b0}}, p} == RSP_FIFO_DEPTH - 1) begin
            ptr_inc = {FIFO_AW{1'b0}};
        end else begin
            ptr_inc = p + 1'b1;
        end
    end
endfunction

/*
 * Lane B (LOOKUP_PORTS = 2): the port-1 GET of a pair.  It never writes: it
 * reads the bank RAMs' port B at stage A and compares at K against the same
 * forwarding window and stash as lane A, with the same terms (names b_*):
 * the window entries' rows a cycle ahead, the key and rows of lane A's
 * request executing one cycle ahead of it (its write is window entry 0 at
 * execute) at K -> E.  Its partner in lane A, at the same stage, is a GET or
 * LOOKUP: nothing to fold in from it.
 */
/* verilator lint_off UNUSEDSIGNAL */
wire                  b_fifo_we;       // lane B's response, into port 1's FIFO (unused with one port)
wire [FIFO_W-1:0]     b_fifo_data;
/* verilator lint_on UNUSEDSIGNAL */

generate
    if (LOOKUP_PORTS == 2) begin : lane_b
        // key and rows are needed up to the compare stage K, the rest up to E
        localparam BST = K_ST + 1;
        reg [NST-1:0]              b_valid;
        reg [BST*KEY_W-1:0]        b_key;
        reg [NST*TAG_W-1:0]        b_tag;
        reg [BST*WAYS*ROW_BITS-1:0] b_addr;      // from stage H+1
        // a writer taken into lane A in each of the last RAM_LAT + 2 cycles
        reg [RAM_LAT+1:0]          a_wr_hist;
        wire [WAYS*ROW_BITS-1:0]   b_hash_rows;
        wire                       b_hash_valid_unused;
        wire                       b_hash_user_unused;

        assign b_block = a_wr_hist[RAM_LAT+1];
        assign b_ram_addr = b_addr[A_ST*WAYS*ROW_BITS +: WAYS*ROW_BITS];

        kv_h3_hash #(
            .KEY_W(KEY_W),
            .WAYS(WAYS),
            .ROW_BITS(ROW_BITS),
            .HASH_SEED(HASH_SEED),
            .STAGES(HASH_STAGES),
            .USER_W(1)
        )
        hash1_inst (
            .clk(clk),
            .rst(rst),
            .s_valid(b_valid[0]),
            .s_key(b_key[0 +: KEY_W]),
            .s_user(1'b0),
            .m_valid(b_hash_valid_unused),
            .m_rows(b_hash_rows),
            .m_user(b_hash_user_unused)
        );

        // compare (stage K)
        wire [KEY_W-1:0]         bk_key = b_key[K_ST*KEY_W +: KEY_W];
        wire [WAYS*ROW_BITS-1:0] bk_addr = b_addr[K_ST*WAYS*ROW_BITS +: WAYS*ROW_BITS];
        wire [WAYS*ROW_BITS-1:0] bk1_addr = b_addr[(K_ST-1)*WAYS*ROW_BITS +: WAYS*ROW_BITS];
        reg  [WIN*WAYS-1:0]      bk_row_match;
        reg  [WAYS*ENT_W-1:0]    bk_fwd;
        reg  [WAYS-1:0]          bk_way_hit;
        reg  [STASH_N-1:0]       bk_st_hit;
        // K -> E
        reg  [WAYS*ENT_W-1:0]    be_fwd_k;
        reg  [WAYS-1:0]          be_way_hit_k;
        reg  [STASH_N-1:0]       be_st_hit_k;
        reg                      be_key_eq_prev;
        reg  [WAYS-1:0]          be_row_eq_prev;
        // execute (stage E)
        reg  [WAYS-1:0]          b_way_hit;
        reg  [STASH_N-1:0]       b_st_hit;
        reg                      b_found;
        reg  [VALUE_W-1:0]       b_found_value;
        reg  [RS_DATA64-1:0]     b_rsp_low;
        reg  [NCNT-1:0]          b_cnt_inc;
        reg  [NCNT-1:0]          b_cnt_pend;
        wire                     be_valid = b_valid[E_ST];

        integer bw, bj, bi;

        always @* begin
            bk_fwd = ram1_q;
            for (bw = 0; bw < WAYS; bw = bw + 1) begin
                for (bj = WIN-1; bj >= 0; bj = bj - 1) begin
                    if (win_we[bj*WAYS + bw] && bk_row_match[bj*WAYS + bw]) begin
                        bk_fwd[bw*ENT_W +: ENT_W] = win_data[(bj*WAYS + bw)*ENT_W +: ENT_W];
                    end
                end
            end
            for (bw = 0; bw < WAYS; bw = bw + 1) begin
                bk_way_hit[bw] = bk_fwd[bw*ENT_W + ENT_W - 1] && bk_fwd[bw*ENT_W + VALUE_W +: KEY_W] == bk_key;
            end
            for (bi = 0; bi < STASH_N; bi = bi + 1) begin
                bk_st_hit[bi] = (STASH > 0) && st_valid[bi] && st_key[bi*KEY_W +: KEY_W] == bk_key;
            end
        end

        always @* begin
            // window entry 0 (lane A's request executed last cycle) folded in, as lane A does
            for (bw = 0; bw < WAYS; bw = bw + 1) begin
                if (win_we[bw] && be_row_eq_prev[bw]) begin
                    b_way_hit[bw] = win_data[bw*ENT_W + ENT_W - 1] && be_key_eq_prev;
                end else begin
                    b_way_hit[bw] = be_way_hit_k[bw];
                end
            end
            for (bi = 0; bi < STASH_N; bi = bi + 1) begin
                b_st_hit[bi] = (STASH > 0) &&
                               (prev_st_we[bi] ? (prev_st_wvalid[bi] && be_key_eq_prev) : be_st_hit_k[bi]);
            end
            b_found = 1'b0;
            b_found_value = {VALUE_W{1'b0}};
            for (bi = STASH_N-1; bi >= 0; bi = bi - 1) begin
                if (b_st_hit[bi]) begin
                    b_found = 1'b1;
                    b_found_value = st_value[bi*VALUE_W +: VALUE_W];
                end
            end
            for (bw = WAYS-1; bw >= 0; bw = bw - 1) begin
                if (b_way_hit[bw]) begin
                    b_found = 1'b1;
                    b_found_value = (win_we[bw] && be_row_eq_prev[bw]) ? win_data[bw*ENT_W +: VALUE_W] :
                                                                        be_fwd_k[bw*ENT_W +: VALUE_W];
                end
            end
            b_rsp_low = {RS_DATA64{1'b0}};
            b_rsp_low[RS_OP +: 5] = OP_GET;
            b_rsp_low[RS_STATUS +: 4] = b_found ? ST_EXACT : ST_MISS;
            b_cnt_inc = {NCNT{1'b0}};
            b_cnt_inc[C_LOOKUPS] = be_valid;
            b_cnt_inc[C_EXACT_HITS] = be_valid && b_found;
            b_cnt_inc[C_MISSES] = be_valid && !b_found;
        end

        assign b_fifo_we = be_valid;
        assign b_fifo_data = {b_tag[E_ST*TAG_W +: TAG_W], b_found ? b_found_value : {VALUE_W{1'b0}},
                              {KEY_W{1'b0}}, b_rsp_low};
        assign cnt_pend_b = b_cnt_pend;

        integer bs, bc;

        always @(posedge clk) begin
            b_valid <= {b_valid[NST-2:0], accept1_b};
            b_key <= {b_key[(BST-1)*KEY_W-1:0], accept1_b ? s_axis_req1_tdata[RQ_KEY +: KEY_W] : b_key[0 +: KEY_W]};
            b_tag <= {b_tag[(NST-1)*TAG_W-1:0], accept1_b ? s_axis_req1_tuser : b_tag[0 +: TAG_W]};
            b_addr <= {b_addr[(BST-1)*WAYS*ROW_BITS-1:0], b_addr[0 +: WAYS*ROW_BITS]};
            b_addr[(H_ST+1)*WAYS*ROW_BITS +: WAYS*ROW_BITS] <= b_hash_rows;
            a_wr_hist <= {a_wr_hist[RAM_LAT:0],
                          accept && (in_op == OP_SET || in_op == OP_DEL || in_op == OP_WRITE_SLOT ||
                                     in_op == OP_MOVE)};

            be_fwd_k <= bk_fwd;
            be_way_hit_k <= bk_way_hit;
            be_st_hit_k <= bk_st_hit;
            be_key_eq_prev <= bk_key == e_key;
            for (bs = 0; bs < WAYS; bs = bs + 1) begin
                be_row_eq_prev[bs] <= bk_addr[bs*ROW_BITS +: ROW_BITS] == e_addr[bs*ROW_BITS +: ROW_BITS];
                bk_row_match[bs] <= e_addr[bs*ROW_BITS +: ROW_BITS] == bk1_addr[bs*ROW_BITS +: ROW_BITS];
                for (bc = 1; bc < WIN; bc = bc + 1) begin
                    bk_row_match[bc*WAYS + bs] <= win_addr[((bc-1)*WAYS + bs)*ROW_BITS +: ROW_BITS] ==
                                                  bk1_addr[bs*ROW_BITS +: ROW_BITS];
                end
            end
            b_cnt_pend <= b_cnt_inc;

            if (rst) begin
                b_valid <= {NST{1'b0}};
                a_wr_hist <= {(RAM_LAT+2){1'b0}};
                b_cnt_pend <= {NCNT{1'b0}};
            end
        end
    end else begin : no_lane_b
        assign b_block = 1'b0;
        assign b_ram_addr = {WAYS*ROW_BITS{1'b0}};
        assign b_fifo_we = 1'b0;
        assign b_fifo_data = {FIFO_W{1'b0}};
        assign cnt_pend_b = {NCNT{1'b0}};
        wire [WAYS*ENT_W-1:0] ram1_q_unused = ram1_q;
    end
endgenerate

/*
 * Port 1's response FIFO (LOOKUP_PORTS = 2): written for port 1's requests,
 * by lane A (a port-1 request taken alone) or lane B (at most one of them in
 * a cycle: a cycle takes at most one port-1 request)
 */
generate
    if (LOOKUP_PORTS == 2) begin : port1_fifo
        reg [FIFO_W-1:0]  fifo1_mem [0:RSP_FIFO_DEPTH-1];
        reg [FIFO_AW-1:0] fifo1_wr_ptr;
        reg [FIFO_AW-1:0] fifo1_rd_ptr;
        reg [CNT_W-1:0]   fifo1_count;
        wire fifo1_a = e_valid && e_src;
        wire fifo1_we = fifo1_a || b_fifo_we;
        wire [FIFO_W-1:0] fifo1_out = fifo1_mem[fifo1_rd_ptr];

        assign m_axis_rsp1_tvalid = fifo1_count != 0;
        assign m_axis_rsp1_tdata = {fifo1_out[RS_DATA64+KEY_W +: VALUE_W], {KEY_W{1'b0}},
                                   fifo1_out[RS_DATA64 +: KEY_W], 64'd0, fifo1_out[0 +: RS_DATA64]};
        assign m_axis_rsp1_tuser = fifo1_out[FIFO_W-TAG_W +: TAG_W];

        always @(posedge clk) begin
            if (fifo1_we) begin
                fifo1_mem[fifo1_wr_ptr] <= fifo1_a ? {e_tag, r_value, r_key, rsp_low} : b_fifo_data;
                fifo1_wr_ptr <= ptr_inc(fifo1_wr_ptr);
            end
            if (rsp1_take) begin
                fifo1_rd_ptr <= ptr_inc(fifo1_rd_ptr);
            end
            fifo1_count <= fifo1_count + {{(CNT_W-1){1'b0}}, fifo1_we} - {{(CNT_W-1){1'b0}}, rsp1_take};
            if (rst) begin
                fifo1_wr_ptr <= {FIFO_AW{1'b0}};
                fifo1_rd_ptr <= {FIFO_AW{1'b0}};
                fifo1_count <= {CNT_W{1'b0}};
            end
        end
    end else begin : no_port1_fifo
        assign m_axis_rsp1_tvalid = 1'b0;
        assign m_axis_rsp1_tdata = {RSP_W{1'b0}};
        assign m_axis_rsp1_tuser = {TAG_W{1'b0}};
    end
endgenerate

/*
 * Mutation log port (registered at E+1), built only for a change log (LOG_PORT)
 */
generate
    if (LOG_PORT) begin : log_port
        reg               log_valid_reg;
        reg               log_del_reg;
        reg [3:0]         log_status_reg;
        reg [KEY_W-1:0]   log_key_reg;
        reg [VALUE_W-1:0] log_value_reg;
        reg [TAG_W-1:0]   log_tag_reg;

        assign log_valid = log_valid_reg;
        assign log_del = log_del_reg;
        assign log_status = log_status_reg;
        assign log_key = log_key_reg;
        assign log_value = log_value_reg;
        assign log_tag = log_tag_reg;

        always @(posedge clk) begin
            log_valid_reg <= e_valid && ((e_op == OP_SET && r_status != ST_FULL) || e_op == OP_DEL);
            if (e_valid) begin
                log_del_reg <= e_op == OP_DEL;
                log_status_reg <= r_status;
                log_key_reg <= e_key;
                log_value_reg <= e_value;
                log_tag_reg <= e_tag;
            end
            if (rst) begin
                log_valid_reg <= 1'b0;
            end
        end
    end else begin : no_log_port
        assign log_valid = 1'b0;
        assign log_del = 1'b0;
        assign log_status = 4'd0;
        assign log_key = {KEY_W{1'b0}};
        assign log_value = {VALUE_W{1'b0}};
        assign log_tag = {TAG_W{1'b0}};
    end
endgenerate

/*
 * Control response FIFO
 */
reg [CFIFO_W-1:0]  cfifo_mem [0:CTL_FIFO_DEPTH-1];
reg [CFIFO_AW-1:0] cfifo_wr_ptr;
reg [CFIFO_AW-1:0] cfifo_rd_ptr;
reg [CCNT_W-1:0]   cfifo_count;

reg [RSP_W-1:0] c_rsp_word;

// READ_RULE returns the entry read back (flag/key/mask/value of the lane
// are zero from V+2 for every other request), READ_RULE_HITS its entry;
// nothing else echoes a field
always @* begin
    c_rsp_word = {RSP_W{1'b0}};
    c_rsp_word[RS_OP +: 5] = ce_op;
    c_rsp_word[RS_STATUS +: 4] = c_status;
    c_rsp_word[RS_DATA64 +: 64] = c_data64;
    if (!ce_bad && (ce_op == OP_READ_RULE || ce_op == OP_READ_RULE_HITS)) begin
        c_rsp_word[RS_ENTRY +: 12] = ce_entry;
    end
    if (!ce_bad && ce_op == OP_READ_RULE) begin
        c_rsp_word[RS_PRIO +: 32] = c_prio[CE_ST*32 +: 32];
    end
    c_rsp_word[RS_FLAG] = c_flag[CE_ST];
    c_rsp_word[RS_KEY +: KEY_W] = c_key[CE_ST*KEY_W +: KEY_W];
    c_rsp_word[RS_MASK +: KEY_W] = c_mask[CE_ST*KEY_W +: KEY_W];
    c_rsp_word[RS_VALUE +: VALUE_W] = c_value[CE_ST*VALUE_W +: VALUE_W];
end
wire [CFIFO_W-1:0] cfifo_out = cfifo_mem[cfifo_rd_ptr];

assign m_axis_ctl_rsp_tvalid = cfifo_count != 0;
assign m_axis_ctl_rsp_tdata = cfifo_out[RSP_W-1:0];
assign m_axis_ctl_rsp_tuser = cfifo_out[RSP_W +: TAG_W];

always @(posedge clk) begin
    if (ce_valid) begin
        cfifo_mem[cfifo_wr_ptr] <= {ce_tag, c_rsp_word};
    end
end

function [CFIFO_AW-1:0] cptr_inc(input [CFIFO_AW-1:0] p);
    begin
        if ({{(32-CFIFO_AW){1'b0}}, p} == CTL_FIFO_DEPTH - 1) begin
            cptr_inc = {CFIFO_AW{1'b0}};
        end else begin
            cptr_inc = p + 1'b1;
        end
    end
endfunction

/*
 * Request pipeline next state: every stage takes the previous one; stage 0
 * takes the accepted request; a few stages take results (one assignment per
 * vector in the clocked block keeps every simulator and synthesizer agreeing)
 */
reg [NST-1:0]          p_valid_next;
reg [NST-1:0]          p_src_next;
reg [NST*5-1:0]        p_op_next;
reg [NST-1:0]          p_flag_next;
reg [3:0]              p_bank_next;
reg [AST*24-1:0]       p_index_next;
reg [AST*4-1:0]        p_bank2_next;
reg [AST*24-1:0]       p_index2_next;
reg [(NST-1)*AD_W-1:0] p_adec_next;
reg [NST*KEY_W-1:0]    p_key_next;
reg [NST*VALUE_W-1:0]  p_value_next;
reg [NST*TAG_W-1:0]    p_tag_next;
reg [NST*WAYS*ROW_BITS-1:0] p_addr_next;
reg [NST-1:0]          p_rhit_next;
reg [NST*RIDX_W-1:0]   p_ridx_next;
reg [NST*PRIO_W-1:0]   p_rprio_next;
reg [NST*VALUE_W-1:0]  p_rvalue_next;

wire [4:0] h_op = p_op[H_ST*5 +: 5];
wire h_data_op = h_op == OP_GET || h_op == OP_LOOKUP || h_op == OP_SET || h_op == OP_DEL;

integer pw;

always @* begin
    p_valid_next = {p_valid[NST-2:0], accept};
    p_src_next = {p_src[NST-2:0], accept1_a};
    p_op_next = {p_op[(NST-1)*5-1:0], p_op[0 +: 5]};
    p_flag_next = {p_flag[NST-2:0], p_flag[0]};
    p_bank_next = p_bank;
    p_index_next = {p_index[(AST-1)*24-1:0], p_index[0 +: 24]};
    p_bank2_next = {p_bank2[(AST-1)*4-1:0], p_bank2[0 +: 4]};
    p_index2_next = {p_index2[(AST-1)*24-1:0], p_index2[0 +: 24]};
    p_adec_next = {p_adec[0 +: (NST-2)*AD_W], addr_decode(p_bank[0 +: 4], p_index[0 +: 24],
                                                           p_bank2[0 +: 4], p_index2[0 +: 24])};
    p_key_next = {p_key[(NST-1)*KEY_W-1:0], p_key[0 +: KEY_W]};
    p_value_next = {p_value[(NST-1)*VALUE_W-1:0], p_value[0 +: VALUE_W]};
    p_tag_next = {p_tag[(NST-1)*TAG_W-1:0], p_tag[0 +: TAG_W]};
    p_addr_next = {p_addr[(NST-1)*WAYS*ROW_BITS-1:0], p_addr[0 +: WAYS*ROW_BITS]};
    p_rhit_next = {p_rhit[NST-2:0], p_rhit[0]};
    p_ridx_next = {p_ridx[(NST-1)*RIDX_W-1:0], p_ridx[0 +: RIDX_W]};
    p_rprio_next = {p_rprio[(NST-1)*PRIO_W-1:0], p_rprio[0 +: PRIO_W]};
    p_rvalue_next = {p_rvalue[(NST-1)*VALUE_W-1:0], p_rvalue[0 +: VALUE_W]};

    // stage 0: the accepted request
    if (accept) begin
        p_op_next[0 +: 5] = in_op;
        p_flag_next[0] = in_tdata[RQ_FLAG];
        p_bank_next[0 +: 4] = in_tdata[RQ_BANK +: 4];
        p_index_next[0 +: 24] = in_tdata[RQ_INDEX +: 24];
        p_bank2_next[0 +: 4] = in_tdata[RQ_BANK2 +: 4];
        p_index2_next[0 +: 24] = in_tdata[RQ_INDEX2 +: 24];
        p_key_next[0 +: KEY_W] = in_tdata[RQ_KEY +: KEY_W];
        p_value_next[0 +: VALUE_W] = in_tdata[RQ_VALUE +: VALUE_W];
        p_tag_next[0 +: TAG_W] = in_tuser;
    end

    // stage H -> H+1: per-way RAM address (the key's row, or the control address)
    for (pw = 0; pw < WAYS; pw = pw + 1) begin
        if (h_data_op) begin
            p_addr_next[((H_ST+1)*WAYS + pw)*ROW_BITS +: ROW_BITS] = hash_rows[pw*ROW_BITS +: ROW_BITS];
        end else if (h_op == OP_MOVE && p_bank2[H_ST*4 +: 4] == pw[3:0]) begin
            p_addr_next[((H_ST+1)*WAYS + pw)*ROW_BITS +: ROW_BITS] = p_index2[H_ST*24 +: ROW_BITS];
        end else begin
            p_addr_next[((H_ST+1)*WAYS + pw)*ROW_BITS +: ROW_BITS] = p_index[H_ST*24 +: ROW_BITS];
        end
    end

    // stage V -> V+1: rule result; V+1 -> V+2: rule value of the winner
    // (the control lane's write of that cycle forwarded)
    p_rhit_next[V_ST+1] = tree_valid;
    p_ridx_next[(V_ST+1)*RIDX_W +: RIDX_W] = tree_idx;
    p_rprio_next[(V_ST+1)*PRIO_W +: PRIO_W] = tree_prio;
    p_rvalue_next[(V_ST+2)*VALUE_W +: VALUE_W] = rval_fwd_q ? rval_fwd_data_q : rval_q;
end

// control lane: the same shift; stage 0 takes the accepted control request;
// V+1 -> V+2: a READ_RULE takes the entry read back (zero if never written)
wire c_rr = c_op[(V_ST+1)*5 +: 5] == OP_READ_RULE && {1'b0, c_entry[(V_ST+1)*12 +: 12]} < RULES_C;
wire c_rr_written = c_rr && rule_written_q;
reg [CNST-1:0]         c_valid_next;
reg [CNST*5-1:0]       c_op_next;
reg [CNST-1:0]         c_flag_next;
reg [CNST*24-1:0]      c_index_next;
reg [CNST*12-1:0]      c_entry_next;
reg [CNST*32-1:0]      c_prio_next;
reg [CNST*KEY_W-1:0]   c_key_next;
reg [CNST*KEY_W-1:0]   c_mask_next;
reg [CNST*VALUE_W-1:0] c_value_next;
reg [CNST*TAG_W-1:0]   c_tag_next;
reg [CNST-1:0]         c_bad_next;

// a control request the engine refuses (engine.md §5.6): an opcode not of
// the control port, an entry >= RULES, a priority >= 2^PRIO_W, a counter id
// that is none
function ctl_refused(input [4:0] op, input [11:0] entry, input [31:0] prio, input [23:0] index);
    begin
        case (op)
            OP_WRITE_RULE: ctl_refused = !rule_write_ok(entry, prio);
            OP_READ_RULE, OP_READ_RULE_HITS: ctl_refused = {1'b0, entry} >= RULES_C;
            OP_CLEAR_COUNTERS: ctl_refused = 1'b0;
            OP_READ_COUNTER: ctl_refused = index >= NCNT;
            default: ctl_refused = 1'b1;
        endcase
    end
endfunction

always @* begin
    c_valid_next = {c_valid[CNST-2:0], c_accept};
    c_op_next = {c_op[(CNST-1)*5-1:0], c_op[0 +: 5]};
    c_flag_next = {c_flag[CNST-2:0], c_flag[0]};
    c_index_next = {c_index[(CNST-1)*24-1:0], c_index[0 +: 24]};
    c_entry_next = {c_entry[(CNST-1)*12-1:0], c_entry[0 +: 12]};
    c_prio_next = {c_prio[(CNST-1)*32-1:0], c_prio[0 +: 32]};
    c_key_next = {c_key[(CNST-1)*KEY_W-1:0], c_key[0 +: KEY_W]};
    c_mask_next = {c_mask[(CNST-1)*KEY_W-1:0], c_mask[0 +: KEY_W]};
    c_value_next = {c_value[(CNST-1)*VALUE_W-1:0], c_value[0 +: VALUE_W]};
    c_tag_next = {c_tag[(CNST-1)*TAG_W-1:0], c_tag[0 +: TAG_W]};
    c_bad_next = {c_bad[CNST-2:0], c_bad[0]};

    if (c_accept) begin
        c_op_next[0 +: 5] = s_axis_ctl_req_tdata[RQ_OP +: 5];
        c_flag_next[0] = s_axis_ctl_req_tdata[RQ_FLAG];
        c_index_next[0 +: 24] = s_axis_ctl_req_tdata[RQ_INDEX +: 24];
        c_entry_next[0 +: 12] = s_axis_ctl_req_tdata[RQ_ENTRY +: 12];
        c_prio_next[0 +: 32] = s_axis_ctl_req_tdata[RQ_PRIO +: 32];
        c_key_next[0 +: KEY_W] = s_axis_ctl_req_tdata[RQ_KEY +: KEY_W];
        c_mask_next[0 +: KEY_W] = s_axis_ctl_req_tdata[RQ_MASK +: KEY_W];
        c_value_next[0 +: VALUE_W] = s_axis_ctl_req_tdata[RQ_VALUE +: VALUE_W];
        c_tag_next[0 +: TAG_W] = s_axis_ctl_req_tuser;
        c_bad_next[0] = ctl_refused(s_axis_ctl_req_tdata[RQ_OP +: 5], s_axis_ctl_req_tdata[RQ_ENTRY +: 12],
                                    s_axis_ctl_req_tdata[RQ_PRIO +: 32], s_axis_ctl_req_tdata[RQ_INDEX +: 24]);
    end

    // from V+2 on flag/key/mask/value are what the response returns: the entry
    // of a READ_RULE (zero if never written), zero for every other request
    // (nothing after V needs them); prio keeps a WRITE_RULE's for its check
    c_flag_next[V_ST+2] = c_rr_written && rule_q[RULE_W-1];
    c_key_next[(V_ST+2)*KEY_W +: KEY_W] = c_rr_written ? rule_q[VALUE_W+PRIO_W+KEY_W +: KEY_W] : {KEY_W{1'b0}};
    c_mask_next[(V_ST+2)*KEY_W +: KEY_W] = c_rr_written ? rule_q[VALUE_W+PRIO_W +: KEY_W] : {KEY_W{1'b0}};
    c_value_next[(V_ST+2)*VALUE_W +: VALUE_W] = c_rr_written ? rule_q[0 +: VALUE_W] : {VALUE_W{1'b0}};
    if (c_rr) begin
        c_prio_next[(V_ST+2)*32 +: 32] = rule_written_q ? {{(32-PRIO_W){1'b0}}, rule_q[VALUE_W +: PRIO_W]} : 32'd0;
    end
end

/*
 * Sequential state
 */
reg [CNT_W-1:0] pend_next;
reg [CNT_W-1:0] pend1_next;
reg busy_next;

wire [CCNT_W-1:0] c_pend_next = c_pend_reg + {{(CCNT_W-1){1'b0}}, c_accept} - {{(CCNT_W-1){1'b0}}, c_rsp_take};

always @* begin
    pend_next = pend_reg + {{(CNT_W-1){1'b0}}, accept0} - {{(CNT_W-1){1'b0}}, rsp_take};
    pend1_next = pend1_reg + {{(CNT_W-1){1'b0}}, accept1} - {{(CNT_W-1){1'b0}}, rsp1_take};
    busy_next = busy_reg;
    if (accept && in_op == OP_CLEAR_TABLE) begin
        busy_next = 1'b1;
    end
    if (sweep_reg && sweep_row_reg == LAST_ROW) begin
        busy_next = 1'b0;
    end
end

integer si, sc;

always @(posedge clk) begin
    // admission
    pend_reg <= pend_next;
    busy_reg <= busy_next;
    // a MOVE takes two cycles of the port: the request behind it never meets
    // its write at the compare stage (see the compare stage)
    ready_reg <= !busy_next && pend_next < RSP_FIFO_DEPTH && !(accept && in_op == OP_MOVE);
    pend1_reg <= pend1_next;
    ready1_reg <= !busy_next && pend1_next < RSP_FIFO_DEPTH && !(accept && in_op == OP_MOVE);
    c_pend_reg <= c_pend_next;
    c_ready_reg <= c_pend_next < CTL_FIFO_DEPTH;

    // clear sweep
    if (sweep_reg) begin
        sweep_row_reg <= sweep_row_reg + 1'b1;
        if (sweep_row_reg == LAST_ROW) begin
            sweep_reg <= 1'b0;
        end
    end
    if (do_clear_table) begin
        sweep_reg <= 1'b1;
        sweep_row_reg <= {ROW_BITS{1'b0}};
    end

    // request pipeline (next state computed below, one assignment per vector)
    p_valid <= p_valid_next;
    p_src <= p_src_next;
    p_op <= p_op_next;
    p_flag <= p_flag_next;
    p_bank <= p_bank_next;
    p_index <= p_index_next;
    p_bank2 <= p_bank2_next;
    p_adec <= p_adec_next;
    p_index2 <= p_index2_next;
    p_key <= p_key_next;
    p_value <= p_value_next;
    p_tag <= p_tag_next;
    p_addr <= p_addr_next;
    p_rhit <= p_rhit_next;
    p_ridx <= p_ridx_next;
    p_rprio <= p_rprio_next;
    p_rvalue <= p_rvalue_next;
    c_valid <= c_valid_next;
    c_op <= c_op_next;
    c_flag <= c_flag_next;
    c_index <= c_index_next;
    c_entry <= c_entry_next;
    c_prio <= c_prio_next;
    c_key <= c_key_next;
    c_mask <= c_mask_next;
    c_value <= c_value_next;
    c_tag <= c_tag_next;
    c_bad <= c_bad_next;
    c_rule_wr0 <= c_accept && c_in_write_rule && !c_bad_next[0];

    // forwarding window / RAM write port: shift in the writes of this cycle's execute
    // (cleared by CLEAR_TABLE: the sweep follows, older writes must not be forwarded past it)
    // (WIN = RAM_LAT + 1 >= 2)
    win_we <= do_clear_table ? {WIN*WAYS{1'b0}} : {win_we[0 +: (WIN-1)*WAYS], wr_we};
    win_addr <= {win_addr[0 +: (WIN-1)*WAYS*ROW_BITS], e_addr};
    win_data <= {win_data[0 +: (WIN-1)*WAYS*ENT_W], wr_data};

    // compare stage -> execute: its results, and the relation of the request
    // moving to execute with the one executing now (key, rows); the window
    // rows against the request moving to the compare stage
    e_fwd_k <= k_fwd;
    e_way_hit_k <= k_way_hit;
    e_st_hit_k <= k_st_hit;
    e_key_eq_prev <= k_key == e_key;
    for (si = 0; si < WAYS; si = si + 1) begin
        e_row_eq_prev[si] <= k_addr[si*ROW_BITS +: ROW_BITS] == e_addr[si*ROW_BITS +: ROW_BITS];
        k_row_match[si] <= e_addr[si*ROW_BITS +: ROW_BITS] == k1_addr[si*ROW_BITS +: ROW_BITS];
        for (sc = 1; sc < WIN; sc = sc + 1) begin
            k_row_match[sc*WAYS + si] <= win_addr[((sc-1)*WAYS + si)*ROW_BITS +: ROW_BITS] ==
                                         k1_addr[si*ROW_BITS +: ROW_BITS];
        end
    end
    prev_st_we <= st_we;
    prev_st_wvalid <= st_wvalid;

    // stash
    for (si = 0; si < STASH_N; si = si + 1) begin
        if (st_we[si]) begin
            st_valid[si] <= st_wvalid[si];
            st_key[si*KEY_W +: KEY_W] <= new_key;
            if (e_op != OP_DEL) begin  // a DEL keeps the entry's value
                st_value[si*VALUE_W +: VALUE_W] <= new_value;
            end
        end
        if (do_clear_table || STASH == 0) begin
            st_valid[si] <= 1'b0;
        end
    end

    // counters: the control lane's clear first (the pending increments are
    // of requests ahead of it: cleared too), then this cycle's increments,
    // added in the next; occupancy is written at execute
    for (sc = 0; sc < NCNT; sc = sc + 1) begin
        if (sc != C_OCCUPANCY) begin
            if (do_clear_counters) begin
                counters[sc*64 +: 64] <= 64'd0;
            end else if (sc == C_CMD_ERRORS) begin
                counters[sc*64 +: 64] <= counters[sc*64 +: 64] + {62'd0, cmd_pend};
            end else begin
                counters[sc*64 +: 64] <= counters[sc*64 +: 64] +
                                         {62'd0, {1'b0, cnt_pend[sc]} + {1'b0, cnt_pend_b[sc]}};
            end
        end
    end
    cnt_pend <= cnt_inc;
    cmd_pend <= {1'b0, cnt_inc[C_CMD_ERRORS]} + {1'b0, c_cmd_error};
    counters[C_OCCUPANCY*64 +: 64] <= occ_now;
    occ_clear_pend <= occ_clear;
    occ_delta_pend <= occ_delta;
    occ_copies_pend <= occ_copies;

    // rule hit counters: read at E-1, forwarded at E, written at E+1.
    // CLEAR_COUNTERS (all) and WRITE_RULE (its entry) at control stage E+1
    // clear the fresh bits and drop the older window writes they cover; the
    // request lane's write of the same cycle comes after them and stays
    rh_fresh_q <= rh_fresh[x_rh_addr] && !do_clear_counters &&
                  !(c_rh_zero && x_rh_addr == ce_entry[RIDX_W-1:0]);
    rh_addr_q <= x_rh_addr;
    c_rh_fresh_q <= rh_fresh[cx_rh_addr] && !do_clear_counters &&
                    !(c_rh_zero && cx_rh_addr == ce_entry[RIDX_W-1:0]);
    c_rh_addr_q <= cx_rh_addr;
    rhw_en[1] <= rhw_en[0] && !do_clear_counters &&
                 !(c_rh_zero && rhw_addr[0 +: RIDX_W] == ce_entry[RIDX_W-1:0]);
    rhw_en[0] <= rh_we;
    rhw_addr <= {rhw_addr[0 +: RIDX_W], rh_waddr};
    rhw_data <= {rhw_data[0 +: 64], rh_wdata};
    for (si = 0; si < RULES_P; si = si + 1) begin
        if (do_clear_counters || RULES == 0 || (c_rh_zero && ce_entry[RIDX_W-1:0] == si[RIDX_W-1:0])) begin
            rh_fresh[si] <= 1'b0;
        end
        if (rh_we && rh_waddr == si[RIDX_W-1:0] && RULES > 0) begin
            rh_fresh[si] <= 1'b1;
        end
    end

    // response FIFO pointers
    if (fifo_we) begin
        fifo_wr_ptr <= ptr_inc(fifo_wr_ptr);
    end
    if (rsp_take) begin
        fifo_rd_ptr <= ptr_inc(fifo_rd_ptr);
    end
    fifo_count <= fifo_count + {{(CNT_W-1){1'b0}}, fifo_we} - {{(CNT_W-1){1'b0}}, rsp_take};
    if (ce_valid) begin
        cfifo_wr_ptr <= cptr_inc(cfifo_wr_ptr);
    end
    if (c_rsp_take) begin
        cfifo_rd_ptr <= cptr_inc(cfifo_rd_ptr);
    end
    cfifo_count <= cfifo_count + {{(CCNT_W-1){1'b0}}, ce_valid} - {{(CCNT_W-1){1'b0}}, c_rsp_take};

    if (rst) begin
        pend_reg <= {CNT_W{1'b0}};
        busy_reg <= 1'b1;
        ready_reg <= 1'b0;
        pend1_reg <= {CNT_W{1'b0}};
        ready1_reg <= 1'b0;
        sweep_reg <= 1'b1;
        sweep_row_reg <= {ROW_BITS{1'b0}};
        p_valid <= {NST{1'b0}};
        c_pend_reg <= {CCNT_W{1'b0}};
        c_ready_reg <= 1'b0;
        c_valid <= {CNST{1'b0}};
        c_rule_wr0 <= 1'b0;
        cfifo_wr_ptr <= {CFIFO_AW{1'b0}};
        cfifo_rd_ptr <= {CFIFO_AW{1'b0}};
        cfifo_count <= {CCNT_W{1'b0}};
        win_we <= {WIN*WAYS{1'b0}};
        st_valid <= {STASH_N{1'b0}};
        prev_st_we <= {STASH_N{1'b0}};
        counters <= {NCNT*64{1'b0}};
        cnt_pend <= {NCNT{1'b0}};
        cmd_pend <= 2'd0;
        occ_clear_pend <= 1'b0;
        occ_delta_pend <= 2'd0;
        occ_copies_pend <= 7'd0;
        rh_fresh <= {RULES_P{1'b0}};
        rhw_en <= 2'b00;
        fifo_wr_ptr <= {FIFO_AW{1'b0}};
        fifo_rd_ptr <= {FIFO_AW{1'b0}};
        fifo_count <= {CNT_W{1'b0}};
    end
end

endmodule

`resetall
