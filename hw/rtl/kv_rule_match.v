/*

pynq-kv: ternary (wildcard) rule table and match vector (docs/engine.md §5.3)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Rule match
 *
 * Holds RULES rule entries (valid, match, mask, priority; the values live
 * in the engine) in registers and compares one key per clock against all of
 * them: hit[e] = valid[e] && (key & mask[e]) == match[e], registered, one
 * cycle after lookup_key is presented (LATENCY = 1).
 *
 * The write port and the lookup port work in the same cycle with
 * sequential semantics "lookup first, then write": a lookup presented in
 * the cycle of a write sees the table before that write, a lookup in any
 * later cycle sees it after.  The read port (rd_*) is combinational from the
 * entry registers, so it reads the same state as a lookup in that cycle.
 *
 * prio exposes the current priorities of all entries (combinational from the
 * registers).  The engine's priority tree samples them in the cycle after
 * the lookup, i.e. in the cycle hit[] appears: a write in the lookup's own
 * cycle is then already visible in prio, but that write belongs to the same
 * request slot as the lookup (one request per cycle), so there is none; a
 * write in the following cycle is not yet visible.  Hence hit[] and prio
 * describe the table as of the lookup.
 *
 * This register/comparator implementation is meant for small RULES; its
 * ports are those a LUTRAM-based (TCAM-style) matcher would have.
 */
module kv_rule_match #
(
    // Key width in bits: 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Number of rule entries: 1 to 4096
    parameter RULES = 16,
    // Priority width in bits: 1 to 32
    parameter PRIO_W = 16,
    // Width of the entry address ports: >= max(1, clog2(RULES))
    parameter ENTRY_W = 12
)
(
    input  wire                  clk,
    input  wire                  rst,

    /*
     * Lookup: key in, hit vector one cycle later
     */
    input  wire [KEY_W-1:0]      lookup_key,
    output wire [RULES-1:0]      hit,
    output wire [RULES*PRIO_W-1:0] prio,

    /*
     * Write port (takes effect at the end of the cycle)
     */
    input  wire                  wr_en,
    input  wire [ENTRY_W-1:0]    wr_entry,
    input  wire                  wr_valid,
    input  wire [KEY_W-1:0]      wr_match,
    input  wire [KEY_W-1:0]      wr_mask,
    input  wire [PRIO_W-1:0]     wr_prio,

    /*
     * Read port (combinational)
     */
    input  wire [ENTRY_W-1:0]    rd_entry,
    output reg                   rd_valid,
    output reg  [KEY_W-1:0]      rd_match,
    output reg  [KEY_W-1:0]      rd_mask,
    output reg  [PRIO_W-1:0]     rd_prio
);

// check configuration
initial begin
    if (RULES < 1 || RULES > 4096) begin
        $error("Error: RULES must be 1 to 4096 (instance %m)");
        $finish;
    end
    if (PRIO_W < 1 || PRIO_W > 32) begin
        $error("Error: PRIO_W must be 1 to 32 (instance %m)");
        $finish;
    end
    if (ENTRY_W < 1 || (1 << ENTRY_W) < RULES) begin
        $error("Error: ENTRY_W too narrow for RULES (instance %m)");
        $finish;
    end
end

reg [RULES-1:0]        valid_reg;
reg [RULES*KEY_W-1:0]  match_reg;
reg [RULES*KEY_W-1:0]  mask_reg;
reg [RULES*PRIO_W-1:0] prio_reg;
reg [RULES-1:0]        hit_reg;

assign hit = hit_reg;
assign prio = prio_reg;

integer e;

always @* begin
    rd_valid = 1'b0;
    rd_match = {KEY_W{1'b0}};
    rd_mask = {KEY_W{1'b0}};
    rd_prio = {PRIO_W{1'b0}};
    for (e = 0; e < RULES; e = e + 1) begin
        if (rd_entry == e[ENTRY_W-1:0]) begin
            rd_valid = valid_reg[e];
            rd_match = match_reg[e*KEY_W +: KEY_W];
            rd_mask = mask_reg[e*KEY_W +: KEY_W];
            rd_prio = prio_reg[e*PRIO_W +: PRIO_W];
        end
    end
end

always @(posedge clk) begin
    for (e = 0; e < RULES; e = e + 1) begin
        hit_reg[e] <= valid_reg[e] && ((lookup_key & mask_reg[e*KEY_W +: KEY_W]) == match_reg[e*KEY_W +: KEY_W]);
        if (wr_en && wr_entry == e[ENTRY_W-1:0]) begin
            valid_reg[e] <= wr_valid;
            match_reg[e*KEY_W +: KEY_W] <= wr_match;
            mask_reg[e*KEY_W +: KEY_W] <= wr_mask;
            prio_reg[e*PRIO_W +: PRIO_W] <= wr_prio;
        end
    end

    if (rst) begin
        valid_reg <= {RULES{1'b0}};
        match_reg <= {RULES*KEY_W{1'b0}};
        mask_reg <= {RULES*KEY_W{1'b0}};
        prio_reg <= {RULES*PRIO_W{1'b0}};
        hit_reg <= {RULES{1'b0}};
    end
end

endmodule

`resetall
