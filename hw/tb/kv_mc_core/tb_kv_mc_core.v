/*

pynq-kv: testbench top of kv_mc_core (core + arbiter + engine)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * kv_mc_core on port B of kv_mc_arb in front of a real kv_engine; port A (the
 * mailbox side in kv_top) is driven by the testbench directly. As in
 * kv_engine_top, the mailbox's rule and counter operations (KV_OP_CTL_MASK) go
 * to the engine's control port instead, and the two responses are merged.
 */
module tb_kv_mc_core #
(
    parameter DATA_W = 64,
    parameter KEY_W = 144,
    parameter VALUE_W = 32,
    parameter WAYS = 2,
    parameter ROWS = 16,
    parameter STASH = 2,
    parameter RULES = 4,
    parameter PRIO_W = 4,
    parameter [63:0] HASH_SEED = 64'h70796E712D6B7631,
    parameter TAG_W = 8,
    parameter RSP_FIFO_DEPTH = 16,
    parameter DESC_DEPTH = 32,
    parameter META_DEPTH = 32,
    parameter LINE_BYTES = 2048,
    parameter ADMIT_ENTRIES = 8
)
(
    input  wire                      clk,
    input  wire                      rst,

    input  wire [DATA_W-1:0]         s_axis_pl_tdata,
    input  wire [DATA_W/8-1:0]       s_axis_pl_tkeep,
    input  wire                      s_axis_pl_tvalid,
    output wire                      s_axis_pl_tready,
    input  wire                      s_axis_pl_tlast,
    input  wire [128:0]              s_axis_pl_meta,

    output wire [DATA_W-1:0]         m_axis_rpl_tdata,
    output wire [DATA_W/8-1:0]       m_axis_rpl_tkeep,
    output wire                      m_axis_rpl_tvalid,
    input  wire                      m_axis_rpl_tready,
    output wire                      m_axis_rpl_tlast,
    output wire [128:0]              m_axis_rpl_meta,

    input  wire [105+2*KEY_W+VALUE_W:0] s_axis_mb_req_tdata,
    input  wire [TAG_W-1:0]          s_axis_mb_req_tuser,
    input  wire                      s_axis_mb_req_tvalid,
    output wire                      s_axis_mb_req_tready,
    output wire [117+2*KEY_W+VALUE_W:0] m_axis_mb_rsp_tdata,
    output wire [TAG_W-1:0]          m_axis_mb_rsp_tuser,
    output wire                      m_axis_mb_rsp_tvalid,
    input  wire                      m_axis_mb_rsp_tready,

    input  wire [ADMIT_ENTRIES-1:0]    cfg_admit_valid,
    input  wire [ADMIT_ENTRIES-1:0]    cfg_admit_allow,
    input  wire [32*ADMIT_ENTRIES-1:0] cfg_admit_addr,
    input  wire [32*ADMIT_ENTRIES-1:0] cfg_admit_mask,
    input  wire [8*ADMIT_ENTRIES-1:0]  cfg_admit_budget,
    input  wire                        cfg_admit_def_allow,
    input  wire [7:0]                  cfg_admit_def_budget,

    output wire [13*64-1:0]          counters,
    output wire [11*64-1:0]          engine_counters
);

localparam REQ_W = 106 + 2*KEY_W + VALUE_W;
localparam RSP_W = 118 + 2*KEY_W + VALUE_W;

wire [REQ_W-1:0] fe_req_tdata;
wire [TAG_W-1:0] fe_req_tuser;
wire fe_req_tvalid, fe_req_tready;
wire [RSP_W-1:0] fe_rsp_tdata;
wire [TAG_W-1:0] fe_rsp_tuser;
wire fe_rsp_tvalid, fe_rsp_tready;
wire [REQ_W-1:0] eng_req_tdata;
wire [TAG_W:0] eng_req_tuser;
wire eng_req_tvalid, eng_req_tready;
wire [RSP_W-1:0] eng_rsp_tdata;
wire [TAG_W:0] eng_rsp_tuser;
wire eng_rsp_tvalid, eng_rsp_tready;

`include "kv_regs.vh"

// the mailbox split by opcode: port A of the arbiter, or the engine's control port
wire mb_is_ctl = KV_OP_CTL_MASK[s_axis_mb_req_tdata[KV_REQ_OP_LSB +: KV_REQ_OP_W]];
wire a_req_tready, ctl_req_tready;
wire [RSP_W-1:0] a_rsp_tdata, ctl_rsp_tdata;
wire [TAG_W-1:0] a_rsp_tuser;
wire [TAG_W:0] ctl_rsp_tuser;
wire a_rsp_tvalid, ctl_rsp_tvalid;
assign s_axis_mb_req_tready = mb_is_ctl ? ctl_req_tready : a_req_tready;
assign m_axis_mb_rsp_tvalid = a_rsp_tvalid || ctl_rsp_tvalid;
assign m_axis_mb_rsp_tdata = a_rsp_tvalid ? a_rsp_tdata : ctl_rsp_tdata;
assign m_axis_mb_rsp_tuser = a_rsp_tvalid ? a_rsp_tuser : ctl_rsp_tuser[TAG_W-1:0];
wire unused_ctl_tag = ctl_rsp_tuser[TAG_W];

kv_mc_core #(
    .DATA_W(DATA_W),
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .TAG_W(TAG_W),
    .DESC_DEPTH(DESC_DEPTH),
    .META_DEPTH(META_DEPTH),
    .LINE_BYTES(LINE_BYTES),
    .ADMIT_ENTRIES(ADMIT_ENTRIES)
)
core_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_pl_tdata(s_axis_pl_tdata),
    .s_axis_pl_tkeep(s_axis_pl_tkeep),
    .s_axis_pl_tvalid(s_axis_pl_tvalid),
    .s_axis_pl_tready(s_axis_pl_tready),
    .s_axis_pl_tlast(s_axis_pl_tlast),
    .s_axis_pl_meta(s_axis_pl_meta),
    .m_axis_rpl_tdata(m_axis_rpl_tdata),
    .m_axis_rpl_tkeep(m_axis_rpl_tkeep),
    .m_axis_rpl_tvalid(m_axis_rpl_tvalid),
    .m_axis_rpl_tready(m_axis_rpl_tready),
    .m_axis_rpl_tlast(m_axis_rpl_tlast),
    .m_axis_rpl_meta(m_axis_rpl_meta),
    .m_axis_req_tdata(fe_req_tdata),
    .m_axis_req_tuser(fe_req_tuser),
    .m_axis_req_tvalid(fe_req_tvalid),
    .m_axis_req_tready(fe_req_tready),
    .s_axis_rsp_tdata(fe_rsp_tdata),
    .s_axis_rsp_tuser(fe_rsp_tuser),
    .s_axis_rsp_tvalid(fe_rsp_tvalid),
    .s_axis_rsp_tready(fe_rsp_tready),
    .cfg_admit_valid(cfg_admit_valid),
    .cfg_admit_allow(cfg_admit_allow),
    .cfg_admit_addr(cfg_admit_addr),
    .cfg_admit_mask(cfg_admit_mask),
    .cfg_admit_budget(cfg_admit_budget),
    .cfg_admit_def_allow(cfg_admit_def_allow),
    .cfg_admit_def_budget(cfg_admit_def_budget),
    .counters_clear(1'b0),
    .counters(counters)
);

kv_mc_arb #(
    .REQ_W(REQ_W),
    .RSP_W(RSP_W),
    .TAG_W(TAG_W)
)
arb_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_a_req_tdata(s_axis_mb_req_tdata),
    .s_axis_a_req_tuser(s_axis_mb_req_tuser),
    .s_axis_a_req_tvalid(s_axis_mb_req_tvalid && !mb_is_ctl),
    .s_axis_a_req_tready(a_req_tready),
    .m_axis_a_rsp_tdata(a_rsp_tdata),
    .m_axis_a_rsp_tuser(a_rsp_tuser),
    .m_axis_a_rsp_tvalid(a_rsp_tvalid),
    .m_axis_a_rsp_tready(m_axis_mb_rsp_tready),
    .s_axis_b_req_tdata(fe_req_tdata),
    .s_axis_b_req_tuser(fe_req_tuser),
    .s_axis_b_req_tvalid(fe_req_tvalid),
    .s_axis_b_req_tready(fe_req_tready),
    .m_axis_b_rsp_tdata(fe_rsp_tdata),
    .m_axis_b_rsp_tuser(fe_rsp_tuser),
    .m_axis_b_rsp_tvalid(fe_rsp_tvalid),
    .m_axis_b_rsp_tready(fe_rsp_tready),
    .m_axis_req_tdata(eng_req_tdata),
    .m_axis_req_tuser(eng_req_tuser),
    .m_axis_req_tvalid(eng_req_tvalid),
    .m_axis_req_tready(eng_req_tready),
    .s_axis_rsp_tdata(eng_rsp_tdata),
    .s_axis_rsp_tuser(eng_rsp_tuser),
    .s_axis_rsp_tvalid(eng_rsp_tvalid),
    .s_axis_rsp_tready(eng_rsp_tready)
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
    .TAG_W(TAG_W + 1),
    .RSP_FIFO_DEPTH(RSP_FIFO_DEPTH)
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
    .s_axis_req1_tvalid(1'b0),
    .m_axis_rsp1_tready(1'b0),
    .s_axis_ctl_req_tdata(s_axis_mb_req_tdata),
    .s_axis_ctl_req_tvalid(s_axis_mb_req_tvalid && mb_is_ctl),
    .s_axis_ctl_req_tready(ctl_req_tready),
    .s_axis_ctl_req_tuser({1'b0, s_axis_mb_req_tuser}),
    .m_axis_ctl_rsp_tdata(ctl_rsp_tdata),
    .m_axis_ctl_rsp_tvalid(ctl_rsp_tvalid),
    .m_axis_ctl_rsp_tready(m_axis_mb_rsp_tready && !a_rsp_tvalid),
    .m_axis_ctl_rsp_tuser(ctl_rsp_tuser),
    .stat_counters(engine_counters)
);

endmodule

`resetall
