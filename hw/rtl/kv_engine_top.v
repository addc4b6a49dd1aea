/*

pynq-kv: lookup engine with its AXI4-Lite CSR (the block a Vivado design instantiates)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * kv_csr (registers, command mailbox, counters) in front of kv_engine.
 *
 * Today the mailbox is the engine's only requester; the Ethernet front-end
 * will share the request stream through an arbiter that routes responses
 * back by tag.  Software finds the geometry in the CSR's read-only registers
 * (docs/registers.md) and drives every operation of docs/engine.md through
 * the mailbox.
 */
module kv_engine_top #
(
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: multiple of 32, 32 to 512
    parameter VALUE_W = 32,
    // Hash banks (ways), one RAM each: 2 to 8
    parameter WAYS = 4,
    // Rows per bank: power of two, 2 to 2^24
    parameter ROWS = 1024,
    // Stash entries: 0 to 64
    parameter STASH = 8,
    // Wildcard rule entries: 0 to 4096
    parameter RULES = 16,
    // Rule priority width in bits: 1 to 32
    parameter PRIO_W = 16,
    // 64-bit seed of the hash family (engine.md §3)
    parameter [63:0] HASH_SEED = 64'h70796E712D6B7631,
    // Width of the request tags between mailbox and engine: >= 1
    parameter TAG_W = 8,
    // AXI4-Lite address width: >= 12 (the register map spans 4 KiB)
    parameter ADDR_WIDTH = 12,
    // Hash pipeline stages (kv_h3_hash STAGES): 1 to 6
    parameter HASH_STAGES = 2,
    // Bank RAM read latency: 1, or 2 for the BRAM output register
    parameter RAM_LAT = 1,
    // Priority tree compare levels per pipeline stage: >= 1
    parameter TREE_LEVELS_PER_STAGE = 2,
    // Rule writes buffered while earlier ones are rewritten (kv_rule_match SLOTS): 1 to 8
    parameter RULE_SLOTS = 4
)
(
    input  wire                    clk,
    input  wire                    rst,

    /*
     * AXI4-Lite slave: registers and mailbox
     */
    input  wire [ADDR_WIDTH-1:0]   s_axil_awaddr,
    input  wire [2:0]              s_axil_awprot,
    input  wire                    s_axil_awvalid,
    output wire                    s_axil_awready,
    input  wire [31:0]             s_axil_wdata,
    input  wire [3:0]              s_axil_wstrb,
    input  wire                    s_axil_wvalid,
    output wire                    s_axil_wready,
    output wire [1:0]              s_axil_bresp,
    output wire                    s_axil_bvalid,
    input  wire                    s_axil_bready,
    input  wire [ADDR_WIDTH-1:0]   s_axil_araddr,
    input  wire [2:0]              s_axil_arprot,
    input  wire                    s_axil_arvalid,
    output wire                    s_axil_arready,
    output wire [31:0]             s_axil_rdata,
    output wire [1:0]              s_axil_rresp,
    output wire                    s_axil_rvalid,
    input  wire                    s_axil_rready
);

localparam REQ_W = 106 + 2*KEY_W + VALUE_W;
localparam RSP_W = 118 + 2*KEY_W + VALUE_W;
localparam NUM_COUNTERS = 11;

// kv_csr and kv_engine check their own parameters; this only adds what joins them
initial begin
    if (ADDR_WIDTH < 12) begin
        $error("Error: ADDR_WIDTH must be at least 12 (instance %m)");
        $finish;
    end
end

wire [REQ_W-1:0]            req_tdata;
wire [TAG_W-1:0]            req_tuser;
wire                        req_tvalid;
wire                        req_tready;
wire [RSP_W-1:0]            rsp_tdata;
wire [TAG_W-1:0]            rsp_tuser;
wire                        rsp_tvalid;
wire                        rsp_tready;
wire [NUM_COUNTERS*64-1:0]  counters;

kv_csr #(
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .WAYS(WAYS),
    .ROWS(ROWS),
    .STASH(STASH),
    .RULES(RULES),
    .PRIO_W(PRIO_W),
    .HASH_SEED(HASH_SEED),
    .TAG_W(TAG_W),
    .ADDR_WIDTH(ADDR_WIDTH),
    .NUM_COUNTERS(NUM_COUNTERS)
)
csr_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(s_axil_awaddr),
    .s_axil_awprot(s_axil_awprot),
    .s_axil_awvalid(s_axil_awvalid),
    .s_axil_awready(s_axil_awready),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wstrb(s_axil_wstrb),
    .s_axil_wvalid(s_axil_wvalid),
    .s_axil_wready(s_axil_wready),
    .s_axil_bresp(s_axil_bresp),
    .s_axil_bvalid(s_axil_bvalid),
    .s_axil_bready(s_axil_bready),
    .s_axil_araddr(s_axil_araddr),
    .s_axil_arprot(s_axil_arprot),
    .s_axil_arvalid(s_axil_arvalid),
    .s_axil_arready(s_axil_arready),
    .s_axil_rdata(s_axil_rdata),
    .s_axil_rresp(s_axil_rresp),
    .s_axil_rvalid(s_axil_rvalid),
    .s_axil_rready(s_axil_rready),
    .m_axis_req_tdata(req_tdata),
    .m_axis_req_tuser(req_tuser),
    .m_axis_req_tvalid(req_tvalid),
    .m_axis_req_tready(req_tready),
    .s_axis_rsp_tdata(rsp_tdata),
    .s_axis_rsp_tuser(rsp_tuser),
    .s_axis_rsp_tvalid(rsp_tvalid),
    .s_axis_rsp_tready(rsp_tready),
    .counters(counters)
);

kv_engine #(
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .WAYS(WAYS),
    .ROWS(ROWS),
    .STASH(STASH),
    .RULES(RULES),
    .PRIO_W(PRIO_W),
    .HASH_SEED(HASH_SEED),
    .TAG_W(TAG_W),
    .HASH_STAGES(HASH_STAGES),
    .RAM_LAT(RAM_LAT),
    .TREE_LEVELS_PER_STAGE(TREE_LEVELS_PER_STAGE),
    .RULE_SLOTS(RULE_SLOTS),
    .NUM_COUNTERS(NUM_COUNTERS)
)
engine_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_req_tdata(req_tdata),
    .s_axis_req_tvalid(req_tvalid),
    .s_axis_req_tready(req_tready),
    .s_axis_req_tuser(req_tuser),
    .m_axis_rsp_tdata(rsp_tdata),
    .m_axis_rsp_tvalid(rsp_tvalid),
    .m_axis_rsp_tready(rsp_tready),
    .m_axis_rsp_tuser(rsp_tuser),
    .stat_counters(counters)
);

endmodule

`resetall
