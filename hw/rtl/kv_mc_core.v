/*

pynq-kv: memcached request-processing core (between the L2-L4 path and the engine)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * docs/frontend.md §3-§8 and §10 in hardware: UDP payloads in (kv_eth_if
 * m_axis_pl), engine requests out and responses back (one kv_mc_arb port),
 * reply payloads out (kv_eth_if s_axis_rpl): the responses of each request
 * datagram packed into reply datagrams of at most MAX_DGRAM bytes, within
 * the reply budget of its source.
 *
 *   kv_mc_admit admission table: datagrams from denied sources dropped, the
 *               others passed on with their budget multiplier M
 *   kv_mc_rx    frame header, binary request walker (one request per cycle
 *               from a realigning byte window), text bytes
 *   kv_mc_text  text subset, byte serial
 *   kv_mc_dec   binary checks, engine key/value encoding
 *   dispatch    binary items first, then text; each item pushes its
 *               response descriptor into the descriptor FIFO and, if it has
 *               an engine operation, goes to the engine in the same cycle
 *   kv_mc_fmt   descriptor + engine response → response, packed into reply
 *               datagrams; the reply budget M x (request payload length)
 *
 * The engine answers in request order, so the descriptor FIFO and the
 * engine's responses line up without tags (tuser is 0).  Per-datagram
 * metadata (source MAC/IP/port, VLAN) and the request id wait in the metadata
 * FIFO (with the budget multiplier of the admission check) until the
 * datagram's last descriptor has been answered.  Both FIFOs
 * are kv_fifo with a registered read (block RAM for wide descriptors).
 *
 * counters: frontend.md §8 datagram/request counters, 64 bits each (zeroed
 * by counters_clear), counter c at counters[64c +: 64]: 0 rx_datagrams,
 * 1 drop_short, 2 drop_multi_datagram, 3 served, 4 requests_binary,
 * 5 requests_text, 6 drop_bad_magic, 7 req_truncated, 8 responses, 9 errors,
 * 10 tx_datagrams, 11 drop_denied, 12 budget_exceeded.
 *
 * cfg_admit_*: the committed admission table of kv_mc_csr (kv_mc_admit).
 */
module kv_mc_core #
(
    // Payload stream width in bits: 64, 128, 256 or 512
    parameter DATA_W = 512,
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: multiple of 32, 32 to 512
    parameter VALUE_W = 32,
    // Tag width of the engine port (kv_mc_arb port B): >= 1
    parameter TAG_W = 8,
    // Metadata bits: >= 64, kv_eth_if's layout (source IPv4 address in
    // [63:32], payload length in [15:0]); kv_eth_if's metadata is 129
    parameter META_W = 129,
    // Descriptor FIFO depth: power of two, >= engine latency + 6 for full rate
    // (dispatch stops one word short of full: its room is a register)
    parameter DESC_DEPTH = 32,
    // Metadata FIFO depth (datagrams in flight): power of two >= 2
    parameter META_DEPTH = 32,
    // Text line buffer in bytes (longest text `get` line): a power of two, 64 to 65536
    parameter LINE_BYTES = 2048,
    // Longest reply datagram in bytes, frame header included: 256 to 65507 (frontend.md §3)
    parameter MAX_DGRAM = 1400,
    // Admission table entries: 1 to 16 (frontend.md §10)
    parameter ADMIT_ENTRIES = 8,
    // Request tdata width: derived, do not override
    parameter REQ_W = 106 + 2*KEY_W + VALUE_W,
    // Response tdata width: derived, do not override
    parameter RSP_W = 118 + 2*KEY_W + VALUE_W
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * UDP payloads of accepted datagrams (kv_eth_if m_axis_pl)
     */
    input  wire [DATA_W-1:0]         s_axis_pl_tdata,
    input  wire [DATA_W/8-1:0]       s_axis_pl_tkeep,
    input  wire                      s_axis_pl_tvalid,
    output wire                      s_axis_pl_tready,
    input  wire                      s_axis_pl_tlast,
    input  wire [META_W-1:0]         s_axis_pl_meta,

    /*
     * Reply payloads (kv_eth_if s_axis_rpl)
     */
    output wire [DATA_W-1:0]         m_axis_rpl_tdata,
    output wire [DATA_W/8-1:0]       m_axis_rpl_tkeep,
    output wire                      m_axis_rpl_tvalid,
    input  wire                      m_axis_rpl_tready,
    output wire                      m_axis_rpl_tlast,
    output wire [META_W-1:0]         m_axis_rpl_meta,

    /*
     * Engine request / response streams (kv_mc_arb port B)
     */
    output wire [REQ_W-1:0]          m_axis_req_tdata,
    output wire [TAG_W-1:0]          m_axis_req_tuser,
    output wire                      m_axis_req_tvalid,
    input  wire                      m_axis_req_tready,
    input  wire [RSP_W-1:0]          s_axis_rsp_tdata,
    input  wire [TAG_W-1:0]          s_axis_rsp_tuser,
    input  wire                      s_axis_rsp_tvalid,
    output wire                      s_axis_rsp_tready,

    /*
     * Admission table (frontend.md §10; kv_mc_admit)
     */
    input  wire [ADMIT_ENTRIES-1:0]    cfg_admit_valid,
    input  wire [ADMIT_ENTRIES-1:0]    cfg_admit_allow,
    input  wire [32*ADMIT_ENTRIES-1:0] cfg_admit_addr,
    input  wire [32*ADMIT_ENTRIES-1:0] cfg_admit_mask,
    input  wire [8*ADMIT_ENTRIES-1:0]  cfg_admit_budget,
    input  wire                        cfg_admit_def_allow,
    input  wire [7:0]                  cfg_admit_def_budget,

    /*
     * Counters (frontend.md §8 datagram and request layers, §10)
     */
    input  wire                      counters_clear,
    output wire [13*64-1:0]          counters
);

`include "kv_regs.vh"

localparam KB = KEY_W / 8;
localparam VB = VALUE_W / 8;
localparam MAX_KEY = KB - 1;
localparam REQ_BYTES = 32 + MAX_KEY + VB - 1;
localparam DESC_W = 60 + 8 * MAX_KEY;
localparam NCNT = 13;
localparam MW = META_W + 8;         // metadata with the budget multiplier above it

// check configuration
initial begin
    if (REQ_W != KV_REQ_W || RSP_W != KV_RSP_W) begin
        $error("Error: REQ_W/RSP_W must be KV_REQ_W/KV_RSP_W of kv_regs.vh (instance %m)");
        $finish;
    end
    if (KV_RSP_STATUS_W != 4 || KV_RSP_ENTRY_W != 12) begin
        $error("Error: engine response fields differ from those kv_mc_fmt uses (instance %m)");
        $finish;
    end
    if (TAG_W < 1) begin
        $error("Error: TAG_W must be at least 1 (instance %m)");
        $finish;
    end
    if (DESC_DEPTH < 4) begin
        $error("Error: DESC_DEPTH must be at least 4 (instance %m)");
        $finish;
    end
    if (META_W < 64) begin
        $error("Error: META_W must be at least 64 (instance %m)");
        $finish;
    end
end

/*
 * admission
 */
wire [DATA_W-1:0] adm_tdata;
wire [DATA_W/8-1:0] adm_tkeep;
wire adm_tvalid, adm_tready, adm_tlast;
wire [META_W-1:0] adm_meta;
wire [7:0] adm_budget;
wire st_denied;

kv_mc_admit #(
    .DATA_W(DATA_W),
    .META_W(META_W),
    .ENTRIES(ADMIT_ENTRIES)
)
admit_inst (
    .clk(clk),
    .rst(rst),
    .cfg_valid(cfg_admit_valid),
    .cfg_allow(cfg_admit_allow),
    .cfg_addr(cfg_admit_addr),
    .cfg_mask(cfg_admit_mask),
    .cfg_budget(cfg_admit_budget),
    .cfg_def_allow(cfg_admit_def_allow),
    .cfg_def_budget(cfg_admit_def_budget),
    .s_axis_tdata(s_axis_pl_tdata),
    .s_axis_tkeep(s_axis_pl_tkeep),
    .s_axis_tvalid(s_axis_pl_tvalid),
    .s_axis_tready(s_axis_pl_tready),
    .s_axis_tlast(s_axis_pl_tlast),
    .s_axis_meta(s_axis_pl_meta),
    .m_axis_tdata(adm_tdata),
    .m_axis_tkeep(adm_tkeep),
    .m_axis_tvalid(adm_tvalid),
    .m_axis_tready(adm_tready),
    .m_axis_tlast(adm_tlast),
    .m_axis_meta(adm_meta),
    .m_axis_budget(adm_budget),
    .stat_denied(st_denied)
);

/*
 * register slice between the admission check and the walker: the walker's
 * ready (a function of its byte window) ends here instead of running on
 * through kv_mc_admit to s_axis_pl_tready
 */
localparam ADM_W = DATA_W + DATA_W/8 + 1 + META_W + 8;
wire [DATA_W-1:0] wk_tdata;
wire [DATA_W/8-1:0] wk_tkeep;
wire wk_tvalid, wk_tready, wk_tlast;
wire [META_W-1:0] wk_meta;
wire [7:0] wk_budget;

kv_skid #(
    .WIDTH(ADM_W)
)
adm_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({adm_budget, adm_meta, adm_tlast, adm_tkeep, adm_tdata}),
    .s_valid(adm_tvalid),
    .s_ready(adm_tready),
    .m_data({wk_budget, wk_meta, wk_tlast, wk_tkeep, wk_tdata}),
    .m_valid(wk_tvalid),
    .m_ready(wk_tready)
);

/*
 * walker
 */
wire [MW+15:0] rx_meta_data;
wire rx_meta_valid, rx_meta_ready;
wire [2:0] item_kind;
wire item_first, item_last;
wire [8*REQ_BYTES-1:0] item_data;
wire [15:0] item_cnt;
wire item_valid, item_ready;
wire [7:0] text_data;
wire text_first, text_last, text_valid, text_ready, text_idle;
wire st_dgram, st_short, st_multi, st_served;

kv_mc_rx #(
    .DATA_W(DATA_W),
    .REQ_BYTES(REQ_BYTES),
    .META_W(MW)
)
rx_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(wk_tdata),
    .s_axis_tkeep(wk_tkeep),
    .s_axis_tvalid(wk_tvalid),
    .s_axis_tready(wk_tready),
    .s_axis_tlast(wk_tlast),
    .s_meta({wk_budget, wk_meta}),
    .m_meta_data(rx_meta_data),
    .m_meta_valid(rx_meta_valid),
    .m_meta_ready(rx_meta_ready),
    .m_item_kind(item_kind),
    .m_item_first(item_first),
    .m_item_last(item_last),
    .m_item_data(item_data),
    .m_item_cnt(item_cnt),
    .m_item_valid(item_valid),
    .m_item_ready(item_ready),
    .m_text_data(text_data),
    .m_text_first(text_first),
    .m_text_last(text_last),
    .m_text_valid(text_valid),
    .m_text_ready(text_ready),
    .text_idle(text_idle),
    .stat_dgram(st_dgram),
    .stat_short(st_short),
    .stat_multi(st_multi),
    .stat_served(st_served)
);

/*
 * binary decoder and text handler
 */
wire dec_valid, dec_ready, dec_eng;
wire [4:0] dec_eop;
wire [KEY_W-1:0] dec_ekey;
wire [VALUE_W-1:0] dec_evalue;
wire dec_last, dec_flag, dec_quiet;
wire [3:0] dec_rk, dec_code;
wire [7:0] dec_opcode, dec_kl;
wire [31:0] dec_opaque;
wire [8*MAX_KEY-1:0] dec_key;
wire st_req_binary, st_bad_magic, st_trunc_bin;

kv_mc_dec #(
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .REQ_BYTES(REQ_BYTES)
)
dec_inst (
    .clk(clk),
    .rst(rst),
    .s_item_kind(item_kind),
    .s_item_last(item_last),
    .s_item_data(item_data),
    .s_item_cnt(item_cnt),
    .s_item_valid(item_valid),
    .s_item_ready(item_ready),
    .o_valid(dec_valid),
    .o_ready(dec_ready),
    .o_eng(dec_eng),
    .o_eop(dec_eop),
    .o_ekey(dec_ekey),
    .o_evalue(dec_evalue),
    .o_d_last(dec_last),
    .o_d_rk(dec_rk),
    .o_d_opcode(dec_opcode),
    .o_d_opaque(dec_opaque),
    .o_d_flag(dec_flag),
    .o_d_quiet(dec_quiet),
    .o_d_code(dec_code),
    .o_d_kl(dec_kl),
    .o_d_key(dec_key),
    .stat_req_binary(st_req_binary),
    .stat_bad_magic(st_bad_magic),
    .stat_truncated(st_trunc_bin)
);

/*
 * register slice on the text bytes: the walker's decision ends here instead of
 * running on into the text handler's state machine (one cycle of text latency);
 * the walker sees the text side idle only when the slice is empty too
 */
wire [7:0] th_data;
wire th_last, th_valid, th_ready, th_idle;

kv_skid #(
    .WIDTH(9)
)
text_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({text_last, text_data}),
    .s_valid(text_valid),
    .s_ready(text_ready),
    .m_data({th_last, th_data}),
    .m_valid(th_valid),
    .m_ready(th_ready)
);

assign text_idle = th_idle && !th_valid;

wire txt_valid, txt_ready, txt_eng;
wire [4:0] txt_eop;
wire [KEY_W-1:0] txt_ekey;
wire [VALUE_W-1:0] txt_evalue;
wire txt_last, txt_flag;
wire [3:0] txt_rk, txt_code;
wire [7:0] txt_kl;
wire [8*MAX_KEY-1:0] txt_key;
wire st_req_text, st_trunc_text;

kv_mc_text #(
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .LINE_BYTES(LINE_BYTES)
)
text_inst (
    .clk(clk),
    .rst(rst),
    .s_data(th_data),
    .s_last(th_last),
    .s_valid(th_valid),
    .s_ready(th_ready),
    .text_idle(th_idle),
    .o_valid(txt_valid),
    .o_ready(txt_ready),
    .o_eng(txt_eng),
    .o_eop(txt_eop),
    .o_ekey(txt_ekey),
    .o_evalue(txt_evalue),
    .o_d_last(txt_last),
    .o_d_rk(txt_rk),
    .o_d_flag(txt_flag),
    .o_d_code(txt_code),
    .o_d_kl(txt_kl),
    .o_d_key(txt_key),
    .stat_req_text(st_req_text),
    .stat_truncated(st_trunc_text)
);

/*
 * dispatch: binary items first (a text datagram starts only once the walker
 * has handed over every earlier item, and later binary items wait for the
 * text handler to be idle, so this keeps datagram order)
 */
wire desc_in_ready;     // the descriptor FIFO has room for a push (desc_room_reg, below)
wire req_ready;         // the request register slice has room
wire sel_bin = dec_valid;
wire d_valid = dec_valid || txt_valid;
wire d_eng = sel_bin ? dec_eng : txt_eng;
wire d_fire = d_valid && desc_in_ready && (!d_eng || req_ready);

assign dec_ready = sel_bin && desc_in_ready && (!dec_eng || req_ready);
assign txt_ready = !sel_bin && desc_in_ready && (!txt_eng || req_ready);

wire [4:0] d_eop = sel_bin ? dec_eop : txt_eop;
wire [KEY_W-1:0] d_ekey = sel_bin ? dec_ekey : txt_ekey;
wire [VALUE_W-1:0] d_evalue = sel_bin ? dec_evalue : txt_evalue;

// engine requests leave through a register slice: the engine's ready ends
// there instead of running through dispatch into the decoders and the walker
wire [4:0] q_eop;
wire [KEY_W-1:0] q_ekey;
wire [VALUE_W-1:0] q_evalue;

kv_skid #(
    .WIDTH(5 + KEY_W + VALUE_W)
)
req_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({d_eop, d_ekey, d_evalue}),
    .s_valid(d_valid && d_eng && desc_in_ready),
    .s_ready(req_ready),
    .m_data({q_eop, q_ekey, q_evalue}),
    .m_valid(m_axis_req_tvalid),
    .m_ready(m_axis_req_tready)
);

reg [REQ_W-1:0] req_word;
always @* begin
    req_word = {REQ_W{1'b0}};
    req_word[KV_REQ_OP_LSB +: KV_REQ_OP_W] = q_eop;
    req_word[KV_REQ_KEY_LSB +: KV_REQ_KEY_W] = q_ekey;
    req_word[KV_REQ_VALUE_LSB +: KV_REQ_VALUE_W] = q_evalue;
end

assign m_axis_req_tdata = req_word;
assign m_axis_req_tuser = {TAG_W{1'b0}};

wire [DESC_W-1:0] desc_in = sel_bin ?
    {dec_last, dec_eng, dec_rk, dec_opcode, dec_opaque, dec_flag, dec_quiet, dec_code, dec_kl, dec_key} :
    {txt_last, txt_eng, txt_rk, 8'd0, 32'd0, txt_flag, 1'b0, txt_code, txt_kl, txt_key};

wire [DESC_W-1:0] desc_out;
wire desc_out_valid, desc_out_ready;
wire desc_fifo_ready;
wire [$clog2(DESC_DEPTH):0] desc_count;

// dispatch's room in the descriptor FIFO, from last cycle's count: at most DEPTH - 2 words then
// (the output register counted) leaves room for one push in each of two cycles, so the FIFO's
// own ready (its pointers) never reaches the decoders' handshakes
reg desc_room_reg;
always @(posedge clk) begin
    desc_room_reg <= desc_count < DESC_DEPTH - 1;
    if (rst) begin
        desc_room_reg <= 1'b0;
    end
end
assign desc_in_ready = desc_room_reg;

kv_fifo #(
    .WIDTH(DESC_W),
    .DEPTH(DESC_DEPTH),
    .OUTPUT_REG(1)
)
desc_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(desc_in),
    .s_valid(d_fire),
    .s_ready(desc_fifo_ready),
    .m_data(desc_out),
    .m_valid(desc_out_valid),
    .m_ready(desc_out_ready),
    .count(desc_count)
);

wire [MW+15:0] meta_out;
wire meta_out_valid, meta_out_ready;
wire [$clog2(META_DEPTH):0] meta_count_unused;

kv_fifo #(
    .WIDTH(MW + 16),
    .DEPTH(META_DEPTH),
    .OUTPUT_REG(1)
)
meta_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(rx_meta_data),
    .s_valid(rx_meta_valid),
    .s_ready(rx_meta_ready),
    .m_data(meta_out),
    .m_valid(meta_out_valid),
    .m_ready(meta_out_ready),
    .count(meta_count_unused)
);

/*
 * engine responses come in through a register slice (status, entry, value:
 * what kv_mc_fmt reads), so the formatter's ready ends there
 */
wire [3:0] r_status;
wire [11:0] r_entry;
wire [VALUE_W-1:0] r_value;
wire r_valid, r_ready;

kv_skid #(
    .WIDTH(16 + VALUE_W)
)
rsp_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({s_axis_rsp_tdata[KV_RSP_STATUS_LSB +: 4], s_axis_rsp_tdata[KV_RSP_ENTRY_LSB +: 12],
             s_axis_rsp_tdata[KV_RSP_VALUE_LSB +: VALUE_W]}),
    .s_valid(s_axis_rsp_tvalid),
    .s_ready(s_axis_rsp_tready),
    .m_data({r_status, r_entry, r_value}),
    .m_valid(r_valid),
    .m_ready(r_ready)
);

/*
 * formatter
 */
wire st_response, st_error, st_datagram, st_budget;

kv_mc_fmt #(
    .DATA_W(DATA_W),
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .META_W(META_W),
    .MAX_DGRAM(MAX_DGRAM)
)
fmt_inst (
    .clk(clk),
    .rst(rst),
    .s_d_valid(desc_out_valid),
    .s_d_ready(desc_out_ready),
    .s_d_last(desc_out[DESC_W-1]),
    .s_d_eng(desc_out[DESC_W-2]),
    .s_d_rk(desc_out[DESC_W-3 -: 4]),
    .s_d_opcode(desc_out[DESC_W-7 -: 8]),
    .s_d_opaque(desc_out[DESC_W-15 -: 32]),
    .s_d_flag(desc_out[DESC_W-47]),
    .s_d_quiet(desc_out[DESC_W-48]),
    .s_d_code(desc_out[DESC_W-49 -: 4]),
    .s_d_kl(desc_out[DESC_W-53 -: 8]),
    .s_d_key(desc_out[8*MAX_KEY-1:0]),
    .s_rsp_status(r_status),
    .s_rsp_entry(r_entry),
    .s_rsp_value(r_value),
    .s_rsp_valid(r_valid),
    .s_rsp_ready(r_ready),
    .s_meta_data(meta_out[META_W+15:0]),
    .s_meta_budget(meta_out[MW+15 -: 8]),
    .s_meta_valid(meta_out_valid),
    .s_meta_ready(meta_out_ready),
    .m_axis_tdata(m_axis_rpl_tdata),
    .m_axis_tkeep(m_axis_rpl_tkeep),
    .m_axis_tvalid(m_axis_rpl_tvalid),
    .m_axis_tready(m_axis_rpl_tready),
    .m_axis_tlast(m_axis_rpl_tlast),
    .m_axis_meta(m_axis_rpl_meta),
    .stat_response(st_response),
    .stat_error(st_error),
    .stat_datagram(st_datagram),
    .stat_budget(st_budget)
);

/*
 * counters
 */
reg [64*NCNT-1:0] cnt_reg;
wire [2*NCNT-1:0] inc = {
    {1'b0, st_budget},                                  // 12 budget_exceeded
    {1'b0, st_denied},                                  // 11 drop_denied
    {1'b0, st_datagram},                                // 10 tx_datagrams
    {1'b0, st_error},                                   // 9 errors
    {1'b0, st_response},                                // 8 responses
    {st_trunc_bin && st_trunc_text, st_trunc_bin ^ st_trunc_text}, // 7 req_truncated
    {1'b0, st_bad_magic},                               // 6 drop_bad_magic
    {1'b0, st_req_text},                                // 5 requests_text
    {1'b0, st_req_binary},                              // 4 requests_binary
    {1'b0, st_served},                                  // 3 served
    {1'b0, st_multi},                                   // 2 drop_multi_datagram
    {1'b0, st_short},                                   // 1 drop_short
    {1'b0, st_dgram}                                    // 0 rx_datagrams
};

integer c;
always @(posedge clk) begin
    for (c = 0; c < NCNT; c = c + 1) begin
        cnt_reg[64*c +: 64] <= cnt_reg[64*c +: 64] + {62'd0, inc[2*c +: 2]};
    end
    if (rst || counters_clear) begin
        cnt_reg <= {64*NCNT{1'b0}};
    end
end

assign counters = cnt_reg;

wire unused = &{1'b0, s_axis_rsp_tuser, text_first, item_first, s_axis_rsp_tdata, desc_fifo_ready};

endmodule

`resetall
