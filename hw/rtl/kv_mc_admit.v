/*

pynq-kv: admission check of the memcached front-end (source prefixes)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * docs/frontend.md §10, admission: every UDP payload's source IPv4 address
 * (s_axis_meta[63:32], kv_eth_if's metadata layout) is compared with the
 * valid entries of the admission table, all in parallel; the first entry in
 * index order whose prefix holds it decides, else the default.  A denied
 * datagram is dropped here (its beats are taken and discarded, stat_denied
 * pulses once); an allowed one passes on with its budget multiplier on
 * m_axis_budget (held with the metadata for the whole datagram).
 *
 * The decision is made in the cycle a datagram's first beat is taken, from
 * the table on cfg_* in that cycle, and kept for the rest of the datagram: a
 * table that changes between two cycles (kv_mc_csr commits it whole in one)
 * decides each datagram entirely by the old or entirely by the new version.
 *
 * One register stage (the compare and its priority feed only register
 * inputs): s_axis_tready = output register free, so the stream passes at a
 * beat per cycle, denied datagrams included; latency one cycle.
 *
 * cfg_mask[32e +: 32] is entry e's prefix mask (ones in the LEN top bits);
 * a source matches entry e when cfg_valid[e] and it equals cfg_addr on the
 * mask.
 */
module kv_mc_admit #
(
    // Payload stream width in bits: 64, 128, 256 or 512
    parameter DATA_W = 512,
    // Metadata bits: >= 64 (source IPv4 address in [63:32])
    parameter META_W = 129,
    // Admission table entries: 1 to 16
    parameter ENTRIES = 8
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * Admission table (kv_mc_csr's committed table)
     */
    input  wire [ENTRIES-1:0]        cfg_valid,
    input  wire [ENTRIES-1:0]        cfg_allow,
    input  wire [32*ENTRIES-1:0]     cfg_addr,
    input  wire [32*ENTRIES-1:0]     cfg_mask,
    input  wire [8*ENTRIES-1:0]      cfg_budget,
    input  wire                      cfg_def_allow,
    input  wire [7:0]                cfg_def_budget,

    /*
     * UDP payloads in (kv_eth_if m_axis_pl)
     */
    input  wire [DATA_W-1:0]         s_axis_tdata,
    input  wire [DATA_W/8-1:0]       s_axis_tkeep,
    input  wire                      s_axis_tvalid,
    output wire                      s_axis_tready,
    input  wire                      s_axis_tlast,
    input  wire [META_W-1:0]         s_axis_meta,

    /*
     * Admitted UDP payloads, with the budget multiplier of their source
     */
    output wire [DATA_W-1:0]         m_axis_tdata,
    output wire [DATA_W/8-1:0]       m_axis_tkeep,
    output wire                      m_axis_tvalid,
    input  wire                      m_axis_tready,
    output wire                      m_axis_tlast,
    output wire [META_W-1:0]         m_axis_meta,
    output wire [7:0]                m_axis_budget,

    /*
     * Statistics: a datagram dropped (one-cycle pulse)
     */
    output wire                      stat_denied
);

// check configuration
initial begin
    if (DATA_W != 64 && DATA_W != 128 && DATA_W != 256 && DATA_W != 512) begin
        $error("Error: DATA_W must be 64, 128, 256 or 512 (instance %m)");
        $finish;
    end
    if (META_W < 64) begin
        $error("Error: META_W must be at least 64 (instance %m)");
        $finish;
    end
    if (ENTRIES < 1 || ENTRIES > 16) begin
        $error("Error: ENTRIES must be 1 to 16 (instance %m)");
        $finish;
    end
end

/*
 * the table's decision for the source address on s_axis_meta
 */
wire [31:0] src = s_axis_meta[63:32];

reg hit_allow;
reg [7:0] hit_budget;
integer e;
always @* begin
    hit_allow = cfg_def_allow;
    hit_budget = cfg_def_budget;
    // highest index first, so that the lowest matching entry is the one left
    for (e = ENTRIES - 1; e >= 0; e = e - 1) begin
        if (cfg_valid[e] && ((src ^ cfg_addr[32*e +: 32]) & cfg_mask[32*e +: 32]) == 32'd0) begin
            hit_allow = cfg_allow[e];
            hit_budget = cfg_budget[8*e +: 8];
        end
    end
end

/*
 * one register stage
 */
reg in_dgram_reg;                   // a datagram's first beat has been taken, not its last
reg pass_reg;                       // ... and it was admitted
reg [7:0] budget_reg;
reg o_valid_reg;
reg [DATA_W-1:0] o_data_reg;
reg [DATA_W/8-1:0] o_keep_reg;
reg o_last_reg;
reg [META_W-1:0] o_meta_reg;
reg stat_denied_reg;

wire o_free = !o_valid_reg || m_axis_tready;
wire take = s_axis_tvalid && o_free;
wire first = !in_dgram_reg;
wire pass = first ? hit_allow : pass_reg;

assign s_axis_tready = o_free;

always @(posedge clk) begin
    stat_denied_reg <= take && first && !hit_allow;
    if (m_axis_tready) begin
        o_valid_reg <= 1'b0;
    end
    if (take) begin
        in_dgram_reg <= !s_axis_tlast;
        o_valid_reg <= pass;
        o_data_reg <= s_axis_tdata;
        o_keep_reg <= s_axis_tkeep;
        o_last_reg <= s_axis_tlast;
        if (first) begin
            pass_reg <= hit_allow;
            budget_reg <= hit_budget;
            o_meta_reg <= s_axis_meta;
        end
    end
    if (rst) begin
        in_dgram_reg <= 1'b0;
        o_valid_reg <= 1'b0;
        stat_denied_reg <= 1'b0;
    end
end

assign m_axis_tdata = o_data_reg;
assign m_axis_tkeep = o_keep_reg;
assign m_axis_tvalid = o_valid_reg;
assign m_axis_tlast = o_last_reg;
assign m_axis_meta = o_meta_reg;
assign m_axis_budget = budget_reg;
assign stat_denied = stat_denied_reg;

endmodule

`resetall
