/*

pynq-kv: lookup engine with its AXI4-Lite CSR (the engine-only block; kv_top holds it
with the Ethernet front-end)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * kv_csr (registers, command mailbox, counters) in front of kv_engine.
 *
 * Software finds the geometry in the CSR's read-only registers
 * (docs/registers.md) and drives every operation of docs/engine.md through
 * the mailbox.  With FE_PORT = 0 the mailbox is the engine's only requester
 * (the engine alone, what `make -C hw synth` and the `rtl` backend build);
 * with FE_PORT = 1 kv_mc_arb shares the engine between the mailbox (port A,
 * never starved) and the s_axis_fe_req / m_axis_fe_rsp streams (port B, the
 * memcached core of kv_top), routing responses back by tag; the engine's
 * tags are then one bit wider.  With FE_PORT = 0 those streams are unused:
 * s_axis_fe_req_tready and m_axis_fe_rsp_tvalid stay 0.
 *
 * The mailbox's commands go to the engine port their opcode names
 * (KV_OP_CTL_MASK, docs/engine.md §5.7): rule and counter operations to the
 * control port, which never holds the request port (nor the front-end's
 * lookups behind the arbiter); all others to the request port (through the
 * arbiter with FE_PORT = 1).  The mailbox has one command in flight, so its
 * responses come back from one port at a time; should both be valid (only
 * after CTRL.ABORT) the request port's goes first.
 *
 * With FE_PORT = 1 and CHANGELOG_DEPTH > 0, kv_changelog keeps a record of
 * every mutation the front-end's requests make (engine.md §10: a SET that
 * changed the table, every DEL), taken from kv_engine's log port, for the
 * host to drain through the CL_* registers of kv_csr.  The mailbox's own
 * SETs and DELs are not logged: the host made them.
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
    // Width of the mailbox (and front-end) request tags: 1 to 32, 1 to 31 with FE_PORT
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
    parameter RULE_SLOTS = 4,
    // Engine response FIFO depth (admission credit): > engine latency for full rate
    parameter RSP_FIFO_DEPTH = 16,
    // Engine control-port response FIFO depth: >= 2
    parameter CTL_FIFO_DEPTH = 4,
    // 1: a second requester on s_axis_fe_req / m_axis_fe_rsp (kv_mc_arb); 0: none
    parameter FE_PORT = 0,
    // Change log capacity in records (engine.md §10, kv_changelog, block RAM): 0 (none) or a
    // power of two from 2 to 65536; only with FE_PORT = 1 (without a data plane there is
    // nothing to log, and CL_DEPTH reads 0)
    parameter CHANGELOG_DEPTH = 512
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
    input  wire                    s_axil_rready,

    /*
     * Front-end requests and responses (FE_PORT = 1), stream layout of kv_regs.vh
     */
    input  wire [106+2*KEY_W+VALUE_W-1:0] s_axis_fe_req_tdata,
    input  wire [TAG_W-1:0]        s_axis_fe_req_tuser,
    input  wire                    s_axis_fe_req_tvalid,
    output wire                    s_axis_fe_req_tready,
    output wire [118+2*KEY_W+VALUE_W-1:0] m_axis_fe_rsp_tdata,
    output wire [TAG_W-1:0]        m_axis_fe_rsp_tuser,
    output wire                    m_axis_fe_rsp_tvalid,
    input  wire                    m_axis_fe_rsp_tready
);

localparam REQ_W = 106 + 2*KEY_W + VALUE_W;
localparam RSP_W = 118 + 2*KEY_W + VALUE_W;
localparam NUM_COUNTERS = 11;
// engine tag width: the arbiter adds the port bit
localparam ENG_TAG_W = TAG_W + FE_PORT;
// the change log exists with a data plane only
localparam CL_DEPTH = FE_PORT ? CHANGELOG_DEPTH : 0;

// kv_csr and kv_engine check their own parameters; this only adds what joins them
initial begin
    if (ADDR_WIDTH < 12) begin
        $error("Error: ADDR_WIDTH must be at least 12 (instance %m)");
        $finish;
    end
    if (FE_PORT != 0 && FE_PORT != 1) begin
        $error("Error: FE_PORT must be 0 or 1 (instance %m)");
        $finish;
    end
    if (FE_PORT == 1 && TAG_W > 31) begin
        $error("Error: TAG_W must be 1 to 31 with FE_PORT (instance %m)");
        $finish;
    end
    if (CHANGELOG_DEPTH != 0 && (CHANGELOG_DEPTH < 2 || CHANGELOG_DEPTH > 65536 ||
            (CHANGELOG_DEPTH & (CHANGELOG_DEPTH - 1)) != 0)) begin
        $error("Error: CHANGELOG_DEPTH must be 0 or a power of two from 2 to 65536 (instance %m)");
        $finish;
    end
end

`include "kv_regs.vh"

// mailbox streams
wire [REQ_W-1:0]            mbx_req_tdata;
wire [TAG_W-1:0]            mbx_req_tuser;
wire                        mbx_req_tvalid;
wire                        mbx_req_tready;
wire [RSP_W-1:0]            mbx_rsp_tdata;
wire [TAG_W-1:0]            mbx_rsp_tuser;
wire                        mbx_rsp_tvalid;
wire                        mbx_rsp_tready;
// the mailbox's request-port share (to the arbiter or the engine)
wire [REQ_W-1:0]            req_tdata;
wire [TAG_W-1:0]            req_tuser;
wire                        req_tvalid;
wire                        req_tready;
wire [RSP_W-1:0]            rsp_tdata;
wire [TAG_W-1:0]            rsp_tuser;
wire                        rsp_tvalid;
wire                        rsp_tready;
// the mailbox's control-port share (straight to the engine)
wire [ENG_TAG_W-1:0]        ctl_rsp_tuser;
wire [RSP_W-1:0]            ctl_rsp_tdata;
wire                        ctl_rsp_tvalid;
wire                        ctl_rsp_tready;
wire                        ctl_req_tready;
wire [ENG_TAG_W-1:0]        ctl_req_tuser;     // the mailbox tag, zero-extended to the engine's
// engine streams
wire [REQ_W-1:0]            eng_req_tdata;
wire [ENG_TAG_W-1:0]        eng_req_tuser;
wire                        eng_req_tvalid;
wire                        eng_req_tready;
wire [RSP_W-1:0]            eng_rsp_tdata;
wire [ENG_TAG_W-1:0]        eng_rsp_tuser;
wire                        eng_rsp_tvalid;
wire                        eng_rsp_tready;
wire [NUM_COUNTERS*64-1:0]  counters;
// the engine's mutation port, and the change log's head record and drain
wire                        log_valid;
wire                        log_del;
wire [3:0]                  log_status;
wire [KEY_W-1:0]            log_key;
wire [VALUE_W-1:0]          log_value;
wire [ENG_TAG_W-1:0]        log_tag;
wire                        cl_valid;
wire [63:0]                 cl_seq;
wire                        cl_del;
wire [3:0]                  cl_status;
wire [KEY_W-1:0]            cl_key;
wire [VALUE_W-1:0]          cl_value;
wire [31:0]                 cl_level;
wire [63:0]                 cl_dropped;
wire                        cl_overflowed;
wire                        cl_pop;
wire                        cl_clear_overflow;

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
    .NUM_COUNTERS(NUM_COUNTERS),
    .CHANGELOG_DEPTH(CL_DEPTH)
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
    .m_axis_req_tdata(mbx_req_tdata),
    .m_axis_req_tuser(mbx_req_tuser),
    .m_axis_req_tvalid(mbx_req_tvalid),
    .m_axis_req_tready(mbx_req_tready),
    .s_axis_rsp_tdata(mbx_rsp_tdata),
    .s_axis_rsp_tuser(mbx_rsp_tuser),
    .s_axis_rsp_tvalid(mbx_rsp_tvalid),
    .s_axis_rsp_tready(mbx_rsp_tready),
    .counters(counters),
    .cl_valid(cl_valid),
    .cl_seq(cl_seq),
    .cl_del(cl_del),
    .cl_status(cl_status),
    .cl_key(cl_key),
    .cl_value(cl_value),
    .cl_level(cl_level),
    .cl_dropped(cl_dropped),
    .cl_overflowed(cl_overflowed),
    .cl_pop(cl_pop),
    .cl_clear_overflow(cl_clear_overflow)
);

// route each mailbox command to its engine port; merge the responses
wire mbx_is_ctl = KV_OP_CTL_MASK[mbx_req_tdata[KV_REQ_OP_LSB +: KV_REQ_OP_W]];

assign req_tdata = mbx_req_tdata;
assign req_tuser = mbx_req_tuser;
assign req_tvalid = mbx_req_tvalid && !mbx_is_ctl;
assign mbx_req_tready = mbx_is_ctl ? ctl_req_tready : req_tready;

// the merged responses reach the CSR block through a register slice: the
// engine's response FIFO and the merge end here instead of running on into
// kv_csr's handshake (docs/rtl.md, Timing); a host command takes one cycle more
wire mrg_rsp_tready;
assign rsp_tready = mrg_rsp_tready;
assign ctl_rsp_tready = mrg_rsp_tready && !rsp_tvalid;

kv_skid #(
    .WIDTH(TAG_W + RSP_W)
)
mbx_rsp_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data(rsp_tvalid ? {rsp_tuser, rsp_tdata} : {ctl_rsp_tuser[TAG_W-1:0], ctl_rsp_tdata}),
    .s_valid(rsp_tvalid || ctl_rsp_tvalid),
    .s_ready(mrg_rsp_tready),
    .m_data({mbx_rsp_tuser, mbx_rsp_tdata}),
    .m_valid(mbx_rsp_tvalid),
    .m_ready(mbx_rsp_tready)
);

generate
    if (FE_PORT) begin : arb
        kv_mc_arb #(
            .REQ_W(REQ_W),
            .RSP_W(RSP_W),
            .TAG_W(TAG_W)
        )
        arb_inst (
            .clk(clk),
            .rst(rst),
            .s_axis_a_req_tdata(req_tdata),
            .s_axis_a_req_tuser(req_tuser),
            .s_axis_a_req_tvalid(req_tvalid),
            .s_axis_a_req_tready(req_tready),
            .m_axis_a_rsp_tdata(rsp_tdata),
            .m_axis_a_rsp_tuser(rsp_tuser),
            .m_axis_a_rsp_tvalid(rsp_tvalid),
            .m_axis_a_rsp_tready(rsp_tready),
            .s_axis_b_req_tdata(s_axis_fe_req_tdata),
            .s_axis_b_req_tuser(s_axis_fe_req_tuser),
            .s_axis_b_req_tvalid(s_axis_fe_req_tvalid),
            .s_axis_b_req_tready(s_axis_fe_req_tready),
            .m_axis_b_rsp_tdata(m_axis_fe_rsp_tdata),
            .m_axis_b_rsp_tuser(m_axis_fe_rsp_tuser),
            .m_axis_b_rsp_tvalid(m_axis_fe_rsp_tvalid),
            .m_axis_b_rsp_tready(m_axis_fe_rsp_tready),
            .m_axis_req_tdata(eng_req_tdata),
            .m_axis_req_tuser(eng_req_tuser),
            .m_axis_req_tvalid(eng_req_tvalid),
            .m_axis_req_tready(eng_req_tready),
            .s_axis_rsp_tdata(eng_rsp_tdata),
            .s_axis_rsp_tuser(eng_rsp_tuser),
            .s_axis_rsp_tvalid(eng_rsp_tvalid),
            .s_axis_rsp_tready(eng_rsp_tready)
        );
        assign ctl_req_tuser = {1'b0, mbx_req_tuser};
        // the control port's tags are the mailbox's: the arbiter's port bit stays 0
        wire unused_ctl_tag = ctl_rsp_tuser[ENG_TAG_W-1];
    end else begin : direct
        assign eng_req_tdata = req_tdata;
        assign eng_req_tuser = req_tuser;
        assign eng_req_tvalid = req_tvalid;
        assign req_tready = eng_req_tready;
        assign rsp_tdata = eng_rsp_tdata;
        assign rsp_tuser = eng_rsp_tuser;
        assign rsp_tvalid = eng_rsp_tvalid;
        assign eng_rsp_tready = rsp_tready;
        assign s_axis_fe_req_tready = 1'b0;
        assign m_axis_fe_rsp_tdata = {RSP_W{1'b0}};
        assign m_axis_fe_rsp_tuser = {TAG_W{1'b0}};
        assign m_axis_fe_rsp_tvalid = 1'b0;
        assign ctl_req_tuser = mbx_req_tuser;
        // no front-end port: its inputs are not used
        wire unused = &{1'b0, s_axis_fe_req_tdata, s_axis_fe_req_tuser, s_axis_fe_req_tvalid,
                        m_axis_fe_rsp_tready};
    end
endgenerate

wire                 eng_req1_tready_unused;
wire [RSP_W-1:0]     eng_rsp1_tdata_unused;
wire                 eng_rsp1_tvalid_unused;
wire [ENG_TAG_W-1:0] eng_rsp1_tuser_unused;

kv_engine #(
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .WAYS(WAYS),
    .ROWS(ROWS),
    .STASH(STASH),
    .RULES(RULES),
    .PRIO_W(PRIO_W),
    .HASH_SEED(HASH_SEED),
    .TAG_W(ENG_TAG_W),
    .HASH_STAGES(HASH_STAGES),
    .RAM_LAT(RAM_LAT),
    .TREE_LEVELS_PER_STAGE(TREE_LEVELS_PER_STAGE),
    .RULE_SLOTS(RULE_SLOTS),
    .RSP_FIFO_DEPTH(RSP_FIFO_DEPTH),
    .CTL_FIFO_DEPTH(CTL_FIFO_DEPTH),
    .NUM_COUNTERS(NUM_COUNTERS),
    .LOG_PORT(CL_DEPTH != 0)
)
engine_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_req_tdata(eng_req_tdata),
    .s_axis_req_tvalid(eng_req_tvalid),
    .s_axis_req_tready(eng_req_tready),
    .s_axis_req_tuser(eng_req_tuser),
    .m_axis_rsp_tdata(eng_rsp_tdata),
    .m_axis_rsp_tvalid(eng_rsp_tvalid),
    .m_axis_rsp_tready(eng_rsp_tready),
    .m_axis_rsp_tuser(eng_rsp_tuser),
    // the second request port (LOOKUP_PORTS = 2) is not wired up here yet
    .s_axis_req1_tdata({REQ_W{1'b0}}),
    .s_axis_req1_tvalid(1'b0),
    .s_axis_req1_tready(eng_req1_tready_unused),
    .s_axis_req1_tuser({ENG_TAG_W{1'b0}}),
    .m_axis_rsp1_tdata(eng_rsp1_tdata_unused),
    .m_axis_rsp1_tvalid(eng_rsp1_tvalid_unused),
    .m_axis_rsp1_tready(1'b0),
    .m_axis_rsp1_tuser(eng_rsp1_tuser_unused),
    .s_axis_ctl_req_tdata(mbx_req_tdata),
    .s_axis_ctl_req_tvalid(mbx_req_tvalid && mbx_is_ctl),
    .s_axis_ctl_req_tready(ctl_req_tready),
    .s_axis_ctl_req_tuser(ctl_req_tuser),
    .m_axis_ctl_rsp_tdata(ctl_rsp_tdata),
    .m_axis_ctl_rsp_tvalid(ctl_rsp_tvalid),
    .m_axis_ctl_rsp_tready(ctl_rsp_tready),
    .m_axis_ctl_rsp_tuser(ctl_rsp_tuser),
    .stat_counters(counters),
    .log_valid(log_valid),
    .log_del(log_del),
    .log_status(log_status),
    .log_key(log_key),
    .log_value(log_value),
    .log_tag(log_tag)
);

/*
 * Change log of the data plane: the mutations of the front-end's requests
 * (port B of the arbiter, tag bit TAG_W); the mailbox's are the host's own
 */
generate
    if (CL_DEPTH != 0) begin : changelog
        kv_changelog #(
            .KEY_W(KEY_W),
            .VALUE_W(VALUE_W),
            .DEPTH(CL_DEPTH)
        )
        changelog_inst (
            .clk(clk),
            .rst(rst),
            .log_valid(log_valid && log_tag[ENG_TAG_W-1]),
            .log_del(log_del),
            .log_status(log_status),
            .log_key(log_key),
            .log_value(log_value),
            .head_valid(cl_valid),
            .head_seq(cl_seq),
            .head_del(cl_del),
            .head_status(cl_status),
            .head_key(cl_key),
            .head_value(cl_value),
            .pop(cl_pop),
            .clear_overflow(cl_clear_overflow),
            .level(cl_level),
            .dropped(cl_dropped),
            .overflowed(cl_overflowed)
        );
        // the port bit is the one tag bit the log needs
        wire unused_log = &{1'b0, log_tag[ENG_TAG_W-2:0]};
    end else begin : no_changelog
        assign cl_valid = 1'b0;
        assign cl_seq = 64'd0;
        assign cl_del = 1'b0;
        assign cl_status = 4'd0;
        assign cl_key = {KEY_W{1'b0}};
        assign cl_value = {VALUE_W{1'b0}};
        assign cl_level = 32'd0;
        assign cl_dropped = 64'd0;
        assign cl_overflowed = 1'b0;
        // no data plane (FE_PORT = 0) or no log: nothing is logged, CL_CTRL writes do nothing
        wire unused_log = &{1'b0, log_valid, log_del, log_status, log_key, log_value, log_tag,
                            cl_pop, cl_clear_overflow};
    end
endgenerate

endmodule

`resetall
