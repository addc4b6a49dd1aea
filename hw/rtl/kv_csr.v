/*

pynq-kv: AXI4-Lite control/status registers and command mailbox

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * AXI4-Lite CSR of the lookup engine (docs/registers.md, docs/rtl.md)
 *
 * The register map comes from hw/regmap/kv_regs.json through the generated
 * kv_regs.vh (KV_* localparams): addresses, register fields, the request and
 * response stream layouts, opcodes and status codes.  Nothing here restates a
 * number of the map.
 *
 * Registers: ID ("PQKV"), VERSION and the geometry parameters (read only), so
 * software discovers the engine; a command mailbox (REQ_* registers, CTRL.GO
 * doorbell, STATUS, RSP_* registers); the engine's 64-bit counters.
 *
 * Mailbox: CTRL.GO sends the REQ_* registers as one beat on m_axis_req
 * (tdata laid out as KV_REQ_*, tuser = TAG, incremented per GO) and sets
 * STATUS.BUSY and STATUS.PENDING.  PENDING drops when the engine accepts the
 * beat (tready); REQ_* writes are refused while PENDING, so tdata is stable
 * while tvalid is high.  The response with the same tag (s_axis_rsp_tready is
 * always 1) is captured into the RSP_* registers and sets STATUS.DONE.
 *
 * Misuse never wedges the bus: every AXI4-Lite transaction gets one response.
 * An unmapped address or a write to a read-only register answers SLVERR
 * (reads return 0) and sets STATUS.ERR_BAD_ADDR; GO while BUSY answers SLVERR
 * and sets ERR_GO_BUSY; a REQ_* write while PENDING answers SLVERR and sets
 * ERR_REQ_LOCKED; an unexpected response is dropped and sets
 * ERR_UNEXPECTED_RSP.  CTRL.CLR_ERR clears them; CTRL.ABORT stops waiting for
 * a response (only once the request has been accepted).
 *
 * Change log (engine.md §10, CL_* registers): the head record of
 * kv_changelog (CL_STATUS, CL_SEQ_*, CL_DATA), its level, depth and drop
 * count; CL_CTRL.POP and CL_CTRL.CLR_OVERFLOW leave as one-cycle strobes.
 * CL_DROPPED_LO latches bits 63:32 for CL_DROPPED_HI.  The record's key and
 * value words come out of the one register CL_DATA, a word per read: a
 * word index register, rewound by a CL_STATUS read and by POP, selects the
 * word and advances on every CL_DATA read, so the AXI4-Lite read multiplexer
 * has one input for the whole record however wide the key and value are.
 *
 * Counters: COUNTER word 2c is bits 31:0 of counters[64c +: 64]; reading it
 * latches bits 63:32 into counter c's shadow, which word 2c+1 returns, so
 * reading LO then HI gives one atomic 64-bit value.
 *
 * AXI4-Lite (the handshakes are kv_axil_regs'): one write and one read in
 * progress at a time; awready/wready pulse one cycle after both awvalid and
 * wvalid are seen (and the previous write response has been or is being
 * accepted), with bvalid; arready likewise, with rvalid.  Byte
 * strobes are honoured.  Address bits above KV_ADDR_BITS are ignored, as are
 * bits 1:0.
 */
module kv_csr #
(
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: a multiple of 32 from 32 to 512
    parameter VALUE_W = 32,
    // Hash banks of the engine (reported in WAYS): 2 to 8
    parameter WAYS = 4,
    // Rows per bank (reported in ROWS): a power of two from 2 to 2^24
    parameter ROWS = 8192,
    // Stash entries (reported in STASH): 0 to 64
    parameter STASH = 8,
    // Wildcard rule entries (reported in RULES): 0 to 4096
    parameter RULES = 256,
    // Rule priority width in bits (reported in PRIO_W): 1 to 32
    parameter PRIO_W = 16,
    // 64-bit seed of the hash family (reported in HASH_SEED_LO/HI)
    parameter [63:0] HASH_SEED = 64'h70796E712D6B7631,
    // Width of the stream tags (tuser) in bits: 1 to 32
    parameter TAG_W = 8,
    // AXI4-Lite address width in bits: at least KV_ADDR_BITS (12); upper bits ignored
    parameter ADDR_WIDTH = 12,
    // Request tdata width: leave at the default, must equal KV_REQ_W of kv_regs.vh (checked)
    parameter REQ_W = 106 + 2*KEY_W + VALUE_W,
    // Response tdata width: leave at the default, must equal KV_RSP_W of kv_regs.vh (checked)
    parameter RSP_W = 118 + 2*KEY_W + VALUE_W,
    // Number of 64-bit counters on `counters`: must equal KV_NUM_COUNTERS (checked)
    parameter NUM_COUNTERS = 11,
    // Change log capacity in records (reported in CL_DEPTH; 0: no change log, the cl_*
    // inputs are then tied to 0): 0 to 65536
    parameter CHANGELOG_DEPTH = 0
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * AXI4-Lite slave
     */
    input  wire [ADDR_WIDTH-1:0]     s_axil_awaddr,
    input  wire [2:0]                s_axil_awprot,
    input  wire                      s_axil_awvalid,
    output wire                      s_axil_awready,
    input  wire [31:0]               s_axil_wdata,
    input  wire [3:0]                s_axil_wstrb,
    input  wire                      s_axil_wvalid,
    output wire                      s_axil_wready,
    output wire [1:0]                s_axil_bresp,
    output wire                      s_axil_bvalid,
    input  wire                      s_axil_bready,
    input  wire [ADDR_WIDTH-1:0]     s_axil_araddr,
    input  wire [2:0]                s_axil_arprot,
    input  wire                      s_axil_arvalid,
    output wire                      s_axil_arready,
    output wire [31:0]               s_axil_rdata,
    output wire [1:0]                s_axil_rresp,
    output wire                      s_axil_rvalid,
    input  wire                      s_axil_rready,

    /*
     * Request stream to the engine (one beat per GO)
     */
    output wire [REQ_W-1:0]          m_axis_req_tdata,
    output wire [TAG_W-1:0]          m_axis_req_tuser,
    output wire                      m_axis_req_tvalid,
    input  wire                      m_axis_req_tready,

    /*
     * Response stream from the engine (always ready)
     */
    input  wire [RSP_W-1:0]          s_axis_rsp_tdata,
    input  wire [TAG_W-1:0]          s_axis_rsp_tuser,
    input  wire                      s_axis_rsp_tvalid,
    output wire                      s_axis_rsp_tready,

    /*
     * Engine counters, counter c (engine.md §6 id) at counters[64*c +: 64]
     */
    input  wire [NUM_COUNTERS*64-1:0] counters,

    /*
     * Change log (kv_changelog, engine.md §10): head record, level, drops; pop
     * and clear_overflow are one-cycle strobes from CL_CTRL writes
     */
    input  wire                      cl_valid,
    input  wire [63:0]               cl_seq,
    input  wire                      cl_del,
    input  wire [3:0]                cl_status,
    input  wire [KEY_W-1:0]          cl_key,
    input  wire [VALUE_W-1:0]        cl_value,
    input  wire [31:0]               cl_level,
    input  wire [63:0]               cl_dropped,
    input  wire                      cl_overflowed,
    output wire                      cl_pop,
    output wire                      cl_clear_overflow
);

`include "kv_regs.vh"

localparam AB = KV_ADDR_BITS;
// register words of a key (KEY_W = 144 has a half word at the top: bits above KEY_W read 0)
localparam KEY_WORDS = (KEY_W + 31) / 32;
localparam KEY_PAD = 32 * KEY_WORDS;
localparam VALUE_WORDS = VALUE_W / 32;
localparam [1:0] RESP_OKAY = 2'b00;
localparam [1:0] RESP_SLVERR = 2'b10;

// check configuration
initial begin
    if (KEY_W != 144 && KEY_W != 288 && KEY_W != 576 && KEY_W != 1152) begin
        $error("Error: KEY_W must be 144, 288, 576 or 1152 (instance %m)");
        $finish;
    end
    if (VALUE_W % 32 != 0 || VALUE_W < 32 || VALUE_W > 512) begin
        $error("Error: VALUE_W must be a multiple of 32 from 32 to 512 (instance %m)");
        $finish;
    end
    if (WAYS < 2 || WAYS > 8) begin
        $error("Error: WAYS must be 2 to 8 (instance %m)");
        $finish;
    end
    if (ROWS < 2 || ROWS > (1 << 24) || (ROWS & (ROWS - 1)) != 0) begin
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
    if (TAG_W < 1 || TAG_W > 32) begin
        $error("Error: TAG_W must be 1 to 32 (instance %m)");
        $finish;
    end
    if (ADDR_WIDTH < AB) begin
        $error("Error: ADDR_WIDTH must be at least KV_ADDR_BITS (instance %m)");
        $finish;
    end
    if (REQ_W != KV_REQ_W || RSP_W != KV_RSP_W) begin
        $error("Error: REQ_W/RSP_W must be KV_REQ_W/KV_RSP_W of kv_regs.vh (instance %m)");
        $finish;
    end
    if (NUM_COUNTERS != KV_NUM_COUNTERS) begin
        $error("Error: NUM_COUNTERS must be KV_NUM_COUNTERS of kv_regs.vh (instance %m)");
        $finish;
    end
    if (CHANGELOG_DEPTH < 0 || CHANGELOG_DEPTH > 65536) begin
        $error("Error: CHANGELOG_DEPTH must be 0 to 65536 (instance %m)");
        $finish;
    end
end

// byte-strobe merge of a write into a register's old value
function [31:0] merge(input [31:0] old, input [31:0] data, input [3:0] strb);
    integer b;
    begin
        for (b = 0; b < 4; b = b + 1) begin
            merge[8*b +: 8] = strb[b] ? data[8*b +: 8] : old[8*b +: 8];
        end
    end
endfunction

// array registers: word index bits (the arrays are aligned to their power-of-two size)
localparam KEY_IB = $clog2(KV_REG_REQ_KEY_SIZE);
localparam VALUE_IB = $clog2(KV_REG_REQ_VALUE_SIZE);
localparam CNT_IB = $clog2(KV_REG_COUNTER_SIZE);
// CL_DATA: the head record's key words then its value words; the index stops at CL_WORDS (past
// the last word, reads 0)
localparam CL_WORDS = KEY_WORDS + VALUE_WORDS;
localparam CL_IB = $clog2(CL_WORDS + 1);

/*
 * state
 */
// request fields
reg [KV_REQ_OP_W-1:0] req_op_reg;
reg [KV_REQ_FLAG_W-1:0] req_flag_reg;
reg [KV_REQ_BANK_W-1:0] req_bank_reg;
reg [KV_REQ_INDEX_W-1:0] req_index_reg;
reg [KV_REQ_BANK2_W-1:0] req_bank2_reg;
reg [KV_REQ_INDEX2_W-1:0] req_index2_reg;
reg [KV_REQ_ENTRY_W-1:0] req_entry_reg;
reg [KV_REQ_PRIO_W-1:0] req_prio_reg;
reg [KEY_PAD-1:0] req_key_reg;              // word i at [32*i +: 32], bits >= KEY_W stay 0
reg [KEY_PAD-1:0] req_mask_reg;
reg [VALUE_W-1:0] req_value_reg;

reg [KV_RSP_W-1:0] rsp_reg;                 // last response, stream layout
reg [TAG_W-1:0] tag_reg;                    // tag of the last GO
reg [TAG_W-1:0] rsp_tag_reg;                // tag of the last response
reg req_valid_reg;                          // PENDING
reg busy_reg;                               // BUSY
reg done_reg;                               // DONE
reg err_go_busy_reg;
reg err_req_locked_reg;
reg err_unexpected_rsp_reg;
reg err_bad_addr_reg;
reg [NUM_COUNTERS*32-1:0] cnt_shadow_reg;    // HI word shadow of counter c at [32*c +: 32]
reg [31:0] cl_dropped_shadow_reg;           // CL_DROPPED_HI as latched by a CL_DROPPED_LO read
reg [CL_IB-1:0] cl_word_reg;                // word of the head record the next CL_DATA read returns

// the change log's inputs, constant 0 without a log (CHANGELOG_DEPTH = 0), so that its read
// multiplexer folds away in an engine without a data plane even when kept as its own module
localparam CL_ON = CHANGELOG_DEPTH != 0;
wire cl_valid_on = CL_ON && cl_valid;
wire [63:0] cl_seq_on = cl_seq & {64{CL_ON}};
wire cl_del_on = CL_ON && cl_del;
wire [3:0] cl_status_on = cl_status & {4{CL_ON}};
wire [KEY_W-1:0] cl_key_on = cl_key & {KEY_W{CL_ON}};
wire [VALUE_W-1:0] cl_value_on = cl_value & {VALUE_W{CL_ON}};
wire [31:0] cl_level_on = cl_level & {32{CL_ON}};
wire [63:0] cl_dropped_on = cl_dropped & {64{CL_ON}};
wire cl_overflowed_on = CL_ON && cl_overflowed;

// request tdata in the generated stream layout; response fields for reading
wire [KEY_PAD-1:0] rsp_key;
wire [KEY_PAD-1:0] rsp_mask;
generate
    if (KEY_PAD > KEY_W) begin : key_pad
        assign rsp_key = {{(KEY_PAD-KEY_W){1'b0}}, rsp_reg[KV_RSP_KEY_LSB +: KV_RSP_KEY_W]};
        assign rsp_mask = {{(KEY_PAD-KEY_W){1'b0}}, rsp_reg[KV_RSP_MASK_LSB +: KV_RSP_MASK_W]};
    end else begin : key_full
        assign rsp_key = rsp_reg[KV_RSP_KEY_LSB +: KV_RSP_KEY_W];
        assign rsp_mask = rsp_reg[KV_RSP_MASK_LSB +: KV_RSP_MASK_W];
    end
endgenerate
wire [VALUE_W-1:0] rsp_value = rsp_reg[KV_RSP_VALUE_LSB +: KV_RSP_VALUE_W];
wire [32*CL_WORDS-1:0] cl_record;           // CL_DATA word i at [32*i +: 32]
generate
    if (KEY_PAD > KEY_W) begin : cl_key_padded
        assign cl_record = {cl_value_on, {(KEY_PAD-KEY_W){1'b0}}, cl_key_on};
    end else begin : cl_key_full
        assign cl_record = {cl_value_on, cl_key_on};
    end
endgenerate

assign m_axis_req_tdata[KV_REQ_OP_LSB +: KV_REQ_OP_W] = req_op_reg;
assign m_axis_req_tdata[KV_REQ_FLAG_LSB +: KV_REQ_FLAG_W] = req_flag_reg;
assign m_axis_req_tdata[KV_REQ_BANK_LSB +: KV_REQ_BANK_W] = req_bank_reg;
assign m_axis_req_tdata[KV_REQ_INDEX_LSB +: KV_REQ_INDEX_W] = req_index_reg;
assign m_axis_req_tdata[KV_REQ_BANK2_LSB +: KV_REQ_BANK2_W] = req_bank2_reg;
assign m_axis_req_tdata[KV_REQ_INDEX2_LSB +: KV_REQ_INDEX2_W] = req_index2_reg;
assign m_axis_req_tdata[KV_REQ_ENTRY_LSB +: KV_REQ_ENTRY_W] = req_entry_reg;
assign m_axis_req_tdata[KV_REQ_PRIO_LSB +: KV_REQ_PRIO_W] = req_prio_reg;

assign m_axis_req_tdata[KV_REQ_KEY_LSB +: KV_REQ_KEY_W] = req_key_reg[KEY_W-1:0];
assign m_axis_req_tdata[KV_REQ_MASK_LSB +: KV_REQ_MASK_W] = req_mask_reg[KEY_W-1:0];
assign m_axis_req_tdata[KV_REQ_VALUE_LSB +: KV_REQ_VALUE_W] = req_value_reg;

assign m_axis_req_tuser = tag_reg;
assign m_axis_req_tvalid = req_valid_reg;
assign s_axis_rsp_tready = 1'b1;

/*
 * AXI4-Lite handshakes: every access is answered in the cycle it is offered
 */
wire [ADDR_WIDTH-1:0] reg_wr_addr, reg_rd_addr;
wire [2:0] reg_wr_prot, reg_rd_prot;
wire [31:0] reg_wr_data;
wire [3:0] reg_wr_strb;
wire [1:0] reg_wr_resp;
wire wr_en, rd_en;             // a write / read is taken this cycle (the ready pulse follows)
reg [31:0] rd_data;
reg rd_ok;

kv_axil_regs #(
    .ADDR_WIDTH(ADDR_WIDTH),
    .FULL_RESP(0)    // this block answers OKAY or SLVERR only
)
axil_inst (
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
    .reg_wr_addr(reg_wr_addr),
    .reg_wr_prot(reg_wr_prot),
    .reg_wr_data(reg_wr_data),
    .reg_wr_strb(reg_wr_strb),
    .reg_wr_req(wr_en),
    .reg_wr_ack(1'b1),
    .reg_wr_resp(reg_wr_resp),
    .reg_rd_addr(reg_rd_addr),
    .reg_rd_prot(reg_rd_prot),
    .reg_rd_req(rd_en),
    .reg_rd_ack(1'b1),
    .reg_rd_data(rd_data),
    .reg_rd_resp(rd_ok ? RESP_OKAY : RESP_SLVERR)
);

wire [AB-1:0] waddr = {reg_wr_addr[AB-1:2], 2'b00};
wire [AB-1:0] raddr = {reg_rd_addr[AB-1:2], 2'b00};

wire [KV_RSP_STATUS_W-1:0] rsp_status = rsp_reg[KV_RSP_STATUS_LSB +: KV_RSP_STATUS_W];
wire err_any = err_go_busy_reg || err_req_locked_reg || err_unexpected_rsp_reg || err_bad_addr_reg;

// STATUS register
reg [31:0] status_word;
always @* begin
    status_word = 32'd0;
    status_word[KV_STATUS_BUSY] = busy_reg;
    status_word[KV_STATUS_PENDING] = req_valid_reg;
    status_word[KV_STATUS_DONE] = done_reg;
    status_word[KV_STATUS_REFUSED] = done_reg && rsp_status == KV_ST_REFUSED;
    status_word[KV_STATUS_ERROR] = err_any;
    status_word[KV_STATUS_RSP_STATUS +: KV_STATUS_RSP_STATUS_W] = rsp_status;
    status_word[KV_STATUS_ERR_GO_BUSY] = err_go_busy_reg;
    status_word[KV_STATUS_ERR_REQ_LOCKED] = err_req_locked_reg;
    status_word[KV_STATUS_ERR_UNEXPECTED_RSP] = err_unexpected_rsp_reg;
    status_word[KV_STATUS_ERR_BAD_ADDR] = err_bad_addr_reg;
end

// CL_STATUS register
reg [31:0] cl_status_word;
always @* begin
    cl_status_word = 32'd0;
    cl_status_word[KV_CL_STATUS_VALID] = cl_valid_on;
    cl_status_word[KV_CL_STATUS_OVERFLOWED] = cl_overflowed_on;
    cl_status_word[KV_CL_STATUS_DELETE] = cl_del_on;
    cl_status_word[KV_CL_STATUS_REC_STATUS +: KV_CL_STATUS_REC_STATUS_W] = cl_status_on;
end

// array decode of an address: region match and word index
wire [KEY_IB-1:0] rd_kidx = raddr[2 +: KEY_IB];
wire [VALUE_IB-1:0] rd_vidx = raddr[2 +: VALUE_IB];
wire [CNT_IB-1:0] rd_cidx = raddr[2 +: CNT_IB];
wire [KEY_IB-1:0] wr_kidx = waddr[2 +: KEY_IB];
wire [VALUE_IB-1:0] wr_vidx = waddr[2 +: VALUE_IB];
wire rd_key_ok = {{(32-KEY_IB){1'b0}}, rd_kidx} < KEY_WORDS;
wire rd_value_ok = {{(32-VALUE_IB){1'b0}}, rd_vidx} < VALUE_WORDS;
wire rd_cnt_ok = {{(32-CNT_IB){1'b0}}, rd_cidx} < 2*NUM_COUNTERS;
wire [CNT_IB-2:0] rd_cnt = rd_cidx[CNT_IB-1:1];
wire wr_key_ok = {{(32-KEY_IB){1'b0}}, wr_kidx} < KEY_WORDS;
wire wr_value_ok = {{(32-VALUE_IB){1'b0}}, wr_vidx} < VALUE_WORDS;

// index words as 32-bit values (loop comparisons without width mismatches)
wire [31:0] rd_kidx32 = {{(32-KEY_IB){1'b0}}, rd_kidx};
wire [31:0] rd_vidx32 = {{(32-VALUE_IB){1'b0}}, rd_vidx};
wire [31:0] rd_cnt32 = {{(33-CNT_IB){1'b0}}, rd_cnt};
wire [31:0] wr_kidx32 = {{(32-KEY_IB){1'b0}}, wr_kidx};
wire [31:0] wr_vidx32 = {{(32-VALUE_IB){1'b0}}, wr_vidx};
wire [31:0] cl_word32 = {{(32-CL_IB){1'b0}}, cl_word_reg};

// CL_DATA's word: a mux on the binary word index, zero past the record (a part-select of a
// register index maps to LUT6 + MUXF7/F8: 133 LUTs fewer than an AND-OR tree at 288/32)
wire [32*(1<<CL_IB)-1:0] cl_record_pad = {{(32*((1<<CL_IB)-CL_WORDS)){1'b0}}, cl_record};
wire [31:0] rd_cl_data = cl_record_pad[32*cl_word_reg +: 32];

// word selects as AND-OR trees (maps to LUTs far better than variable part-selects)
reg [31:0] rd_req_key, rd_req_mask, rd_rsp_key, rd_rsp_mask, rd_req_value, rd_rsp_value;
reg [31:0] rd_cnt_lo_word, rd_cnt_hi_word, rd_cnt_shadow_word;
integer k;
always @* begin
    rd_req_key = 32'd0;
    rd_req_mask = 32'd0;
    rd_rsp_key = 32'd0;
    rd_rsp_mask = 32'd0;
    for (k = 0; k < KEY_WORDS; k = k + 1) begin
        rd_req_key = rd_req_key | (req_key_reg[32*k +: 32] & {32{rd_kidx32 == k}});
        rd_req_mask = rd_req_mask | (req_mask_reg[32*k +: 32] & {32{rd_kidx32 == k}});
        rd_rsp_key = rd_rsp_key | (rsp_key[32*k +: 32] & {32{rd_kidx32 == k}});
        rd_rsp_mask = rd_rsp_mask | (rsp_mask[32*k +: 32] & {32{rd_kidx32 == k}});
    end
    rd_req_value = 32'd0;
    rd_rsp_value = 32'd0;
    for (k = 0; k < VALUE_WORDS; k = k + 1) begin
        rd_req_value = rd_req_value | (req_value_reg[32*k +: 32] & {32{rd_vidx32 == k}});
        rd_rsp_value = rd_rsp_value | (rsp_value[32*k +: 32] & {32{rd_vidx32 == k}});
    end
    rd_cnt_lo_word = 32'd0;
    rd_cnt_hi_word = 32'd0;
    rd_cnt_shadow_word = 32'd0;
    for (k = 0; k < NUM_COUNTERS; k = k + 1) begin
        rd_cnt_lo_word = rd_cnt_lo_word | (counters[64*k +: 32] & {32{rd_cnt32 == k}});
        rd_cnt_hi_word = rd_cnt_hi_word | (counters[64*k + 32 +: 32] & {32{rd_cnt32 == k}});
        rd_cnt_shadow_word = rd_cnt_shadow_word | (cnt_shadow_reg[32*k +: 32] & {32{rd_cnt32 == k}});
    end
end

function in_array(input [AB-1:0] addr, input [AB-1:0] base, input integer ib);
    begin
        in_array = (addr >> (ib + 2)) == (base >> (ib + 2));
    end
endfunction

/*
 * read decode: data and OKAY/SLVERR of the register at raddr
 */
reg rd_cnt_lo;                 // reading a counter's LO word: latch its HI word
reg rd_cl_dropped_lo;          // reading CL_DROPPED_LO: latch CL_DROPPED_HI
reg rd_cl_status;              // reading CL_STATUS: rewind CL_DATA to word 0
reg rd_cl_data_word;           // reading CL_DATA: advance to the next word

always @* begin
    rd_data = 32'd0;
    rd_ok = 1'b1;
    rd_cnt_lo = 1'b0;
    rd_cl_dropped_lo = 1'b0;
    rd_cl_status = 1'b0;
    rd_cl_data_word = 1'b0;
    case (raddr)
        KV_REG_ID:           rd_data = KV_ID_MAGIC;
        KV_REG_VERSION:      rd_data = KV_VERSION;
        KV_REG_KEY_W:        rd_data = KEY_W;
        KV_REG_VALUE_W:      rd_data = VALUE_W;
        KV_REG_WAYS:         rd_data = WAYS;
        KV_REG_ROWS:         rd_data = ROWS;
        KV_REG_STASH:        rd_data = STASH;
        KV_REG_RULES:        rd_data = RULES;
        KV_REG_PRIO_W:       rd_data = PRIO_W;
        KV_REG_HASH_SEED_LO: rd_data = HASH_SEED[31:0];
        KV_REG_HASH_SEED_HI: rd_data = HASH_SEED[63:32];
        KV_REG_TAG_W:        rd_data = TAG_W;
        KV_REG_NUM_COUNTERS: rd_data = NUM_COUNTERS;
        KV_REG_CTRL:         rd_data = 32'd0;
        KV_REG_STATUS:       rd_data = status_word;
        KV_REG_TAG:          rd_data[TAG_W-1:0] = tag_reg;
        KV_REG_REQ_OP:       rd_data[KV_REQ_OP_W-1:0] = req_op_reg;
        KV_REG_REQ_FLAG:     rd_data[KV_REQ_FLAG_W-1:0] = req_flag_reg;
        KV_REG_REQ_BANK:     rd_data[KV_REQ_BANK_W-1:0] = req_bank_reg;
        KV_REG_REQ_INDEX:    rd_data[KV_REQ_INDEX_W-1:0] = req_index_reg;
        KV_REG_REQ_BANK2:    rd_data[KV_REQ_BANK2_W-1:0] = req_bank2_reg;
        KV_REG_REQ_INDEX2:   rd_data[KV_REQ_INDEX2_W-1:0] = req_index2_reg;
        KV_REG_REQ_ENTRY:    rd_data[KV_REQ_ENTRY_W-1:0] = req_entry_reg;
        KV_REG_REQ_PRIO:     rd_data[KV_REQ_PRIO_W-1:0] = req_prio_reg;
        KV_REG_RSP_OP:       rd_data[KV_RSP_OP_W-1:0] = rsp_reg[KV_RSP_OP_LSB +: KV_RSP_OP_W];
        KV_REG_RSP_STATUS:   rd_data[KV_RSP_STATUS_W-1:0] = rsp_status;
        KV_REG_RSP_FLAG:     rd_data[KV_RSP_FLAG_W-1:0] = rsp_reg[KV_RSP_FLAG_LSB +: KV_RSP_FLAG_W];
        KV_REG_RSP_ENTRY:    rd_data[KV_RSP_ENTRY_W-1:0] = rsp_reg[KV_RSP_ENTRY_LSB +: KV_RSP_ENTRY_W];
        KV_REG_RSP_PRIO:     rd_data[KV_RSP_PRIO_W-1:0] = rsp_reg[KV_RSP_PRIO_LSB +: KV_RSP_PRIO_W];
        KV_REG_RSP_DATA_LO:  rd_data = rsp_reg[KV_RSP_DATA64_LSB +: 32];
        KV_REG_RSP_DATA_HI:  rd_data = rsp_reg[KV_RSP_DATA64_LSB + 32 +: 32];
        KV_REG_RSP_TAG:      rd_data[TAG_W-1:0] = rsp_tag_reg;
        KV_REG_CL_CTRL:      rd_data = 32'd0;
        KV_REG_CL_STATUS: begin
            rd_data = cl_status_word;
            rd_cl_status = 1'b1;
        end
        KV_REG_CL_LEVEL:     rd_data = cl_level_on;
        KV_REG_CL_DEPTH:     rd_data = CHANGELOG_DEPTH;
        KV_REG_CL_SEQ_LO:    rd_data = cl_seq_on[31:0];
        KV_REG_CL_SEQ_HI:    rd_data = cl_seq_on[63:32];
        KV_REG_CL_DROPPED_LO: begin
            rd_data = cl_dropped_on[31:0];
            rd_cl_dropped_lo = 1'b1;
        end
        KV_REG_CL_DROPPED_HI: rd_data = cl_dropped_shadow_reg;
        KV_REG_CL_DATA: begin
            rd_data = rd_cl_data;
            rd_cl_data_word = 1'b1;
        end
        default: begin
            rd_ok = 1'b0;
            if (in_array(raddr, KV_REG_REQ_KEY, KEY_IB) && rd_key_ok) begin
                rd_ok = 1'b1;
                rd_data = rd_req_key;
            end
            if (in_array(raddr, KV_REG_REQ_MASK, KEY_IB) && rd_key_ok) begin
                rd_ok = 1'b1;
                rd_data = rd_req_mask;
            end
            if (in_array(raddr, KV_REG_REQ_VALUE, VALUE_IB) && rd_value_ok) begin
                rd_ok = 1'b1;
                rd_data = rd_req_value;
            end
            if (in_array(raddr, KV_REG_RSP_KEY, KEY_IB) && rd_key_ok) begin
                rd_ok = 1'b1;
                rd_data = rd_rsp_key;
            end
            if (in_array(raddr, KV_REG_RSP_MASK, KEY_IB) && rd_key_ok) begin
                rd_ok = 1'b1;
                rd_data = rd_rsp_mask;
            end
            if (in_array(raddr, KV_REG_RSP_VALUE, VALUE_IB) && rd_value_ok) begin
                rd_ok = 1'b1;
                rd_data = rd_rsp_value;
            end
            if (in_array(raddr, KV_REG_COUNTER, CNT_IB) && rd_cnt_ok) begin
                rd_ok = 1'b1;
                rd_cnt_lo = !rd_cidx[0];
                rd_data = rd_cidx[0] ? rd_cnt_shadow_word : rd_cnt_lo_word;
            end
        end
    endcase
end

/*
 * write decode: which register the write at waddr targets
 */
localparam [3:0]
    WR_NONE = 4'd0,    // unmapped or read only: SLVERR
    WR_CTRL = 4'd1,
    WR_OP = 4'd2,
    WR_FLAG = 4'd3,
    WR_BANK = 4'd4,
    WR_INDEX = 4'd5,
    WR_BANK2 = 4'd6,
    WR_INDEX2 = 4'd7,
    WR_ENTRY = 4'd8,
    WR_PRIO = 4'd9,
    WR_KEY = 4'd10,
    WR_MASK = 4'd11,
    WR_VALUE = 4'd12,
    WR_CL_CTRL = 4'd13;

reg [3:0] wr_sel;
always @* begin
    wr_sel = WR_NONE;
    case (waddr)
        KV_REG_CTRL:       wr_sel = WR_CTRL;
        KV_REG_REQ_OP:     wr_sel = WR_OP;
        KV_REG_REQ_FLAG:   wr_sel = WR_FLAG;
        KV_REG_REQ_BANK:   wr_sel = WR_BANK;
        KV_REG_REQ_INDEX:  wr_sel = WR_INDEX;
        KV_REG_REQ_BANK2:  wr_sel = WR_BANK2;
        KV_REG_REQ_INDEX2: wr_sel = WR_INDEX2;
        KV_REG_REQ_ENTRY:  wr_sel = WR_ENTRY;
        KV_REG_REQ_PRIO:   wr_sel = WR_PRIO;
        KV_REG_CL_CTRL:    wr_sel = WR_CL_CTRL;
        default: begin
            if (in_array(waddr, KV_REG_REQ_KEY, KEY_IB) && wr_key_ok) begin
                wr_sel = WR_KEY;
            end
            if (in_array(waddr, KV_REG_REQ_MASK, KEY_IB) && wr_key_ok) begin
                wr_sel = WR_MASK;
            end
            if (in_array(waddr, KV_REG_REQ_VALUE, VALUE_IB) && wr_value_ok) begin
                wr_sel = WR_VALUE;
            end
        end
    endcase
end

// each written register merges the strobed bytes into its own old value (no
// multiplexer of every register's old value on the write path); the fields use
// their low bits
/* verilator lint_off UNUSEDSIGNAL */
wire [31:0] wr_op_new = merge({{(32-KV_REQ_OP_W){1'b0}}, req_op_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] wr_flag_new = merge({{(32-KV_REQ_FLAG_W){1'b0}}, req_flag_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] wr_bank_new = merge({{(32-KV_REQ_BANK_W){1'b0}}, req_bank_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] wr_index_new = merge({{(32-KV_REQ_INDEX_W){1'b0}}, req_index_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] wr_bank2_new = merge({{(32-KV_REQ_BANK2_W){1'b0}}, req_bank2_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] wr_index2_new = merge({{(32-KV_REQ_INDEX2_W){1'b0}}, req_index2_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] wr_entry_new = merge({{(32-KV_REQ_ENTRY_W){1'b0}}, req_entry_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] wr_prio_new = merge({{(32-KV_REQ_PRIO_W){1'b0}}, req_prio_reg}, reg_wr_data, reg_wr_strb);
/* verilator lint_on UNUSEDSIGNAL */
// key/mask words keep only the bits below KEY_W
localparam [KEY_PAD-1:0] KEY_BITS = {KEY_PAD{1'b1}} >> (KEY_PAD - KEY_W);

wire wr_ctrl = wr_sel == WR_CTRL;
wire wr_cl_ctrl = wr_sel == WR_CL_CTRL;
wire wr_req_field = wr_sel != WR_NONE && !wr_ctrl && !wr_cl_ctrl;
// CTRL bits act on the bytes whose strobe is set
wire [31:0] ctrl_bits = merge(32'd0, reg_wr_data, reg_wr_strb);
wire go = wr_en && wr_ctrl && ctrl_bits[KV_CTRL_GO];
wire go_ok = go && !busy_reg;
wire clr_err = wr_en && wr_ctrl && ctrl_bits[KV_CTRL_CLR_ERR];
wire abort = wr_en && wr_ctrl && ctrl_bits[KV_CTRL_ABORT] && busy_reg && !req_valid_reg;
wire req_locked = wr_en && wr_req_field && req_valid_reg;
wire req_write = wr_en && wr_req_field && !req_valid_reg;
assign cl_pop = wr_en && wr_cl_ctrl && ctrl_bits[KV_CL_CTRL_POP];
assign cl_clear_overflow = wr_en && wr_cl_ctrl && ctrl_bits[KV_CL_CTRL_CLR_OVERFLOW];
wire rsp_match = busy_reg && !req_valid_reg && s_axis_rsp_tuser == tag_reg;
wire rsp_take = s_axis_rsp_tvalid && rsp_match;
wire rsp_bad = s_axis_rsp_tvalid && !rsp_match;

// request registers and counter shadows
integer j;
always @(posedge clk) begin
    if (req_write) begin
        case (wr_sel)
            WR_OP:     req_op_reg <= wr_op_new[KV_REQ_OP_W-1:0];
            WR_FLAG:   req_flag_reg <= wr_flag_new[KV_REQ_FLAG_W-1:0];
            WR_BANK:   req_bank_reg <= wr_bank_new[KV_REQ_BANK_W-1:0];
            WR_INDEX:  req_index_reg <= wr_index_new[KV_REQ_INDEX_W-1:0];
            WR_BANK2:  req_bank2_reg <= wr_bank2_new[KV_REQ_BANK2_W-1:0];
            WR_INDEX2: req_index2_reg <= wr_index2_new[KV_REQ_INDEX2_W-1:0];
            WR_ENTRY:  req_entry_reg <= wr_entry_new[KV_REQ_ENTRY_W-1:0];
            WR_PRIO:   req_prio_reg <= wr_prio_new[KV_REQ_PRIO_W-1:0];
            default:   ;
        endcase
        for (j = 0; j < KEY_WORDS; j = j + 1) begin
            if (wr_kidx32 == j && wr_sel == WR_KEY) begin
                req_key_reg[32*j +: 32] <= merge(req_key_reg[32*j +: 32], reg_wr_data, reg_wr_strb) & KEY_BITS[32*j +: 32];
            end
            if (wr_kidx32 == j && wr_sel == WR_MASK) begin
                req_mask_reg[32*j +: 32] <= merge(req_mask_reg[32*j +: 32], reg_wr_data, reg_wr_strb) & KEY_BITS[32*j +: 32];
            end
        end
        for (j = 0; j < VALUE_WORDS; j = j + 1) begin
            if (wr_vidx32 == j && wr_sel == WR_VALUE) begin
                req_value_reg[32*j +: 32] <= merge(req_value_reg[32*j +: 32], reg_wr_data, reg_wr_strb);
            end
        end
    end
    if (rd_en && rd_cl_dropped_lo) begin
        cl_dropped_shadow_reg <= cl_dropped_on[63:32];
    end
    if (rd_en && rd_cl_data_word && cl_word32 != CL_WORDS) begin
        cl_word_reg <= cl_word_reg + 1'b1;
    end
    if ((rd_en && rd_cl_status) || cl_pop) begin
        cl_word_reg <= {CL_IB{1'b0}};
    end
    if (rd_en && rd_cnt_lo) begin
        for (j = 0; j < NUM_COUNTERS; j = j + 1) begin
            if (rd_cnt32 == j) begin
                cnt_shadow_reg[32*j +: 32] <= rd_cnt_hi_word;
            end
        end
    end
    if (rst) begin
        req_op_reg <= {KV_REQ_OP_W{1'b0}};
        req_flag_reg <= {KV_REQ_FLAG_W{1'b0}};
        req_bank_reg <= {KV_REQ_BANK_W{1'b0}};
        req_index_reg <= {KV_REQ_INDEX_W{1'b0}};
        req_bank2_reg <= {KV_REQ_BANK2_W{1'b0}};
        req_index2_reg <= {KV_REQ_INDEX2_W{1'b0}};
        req_entry_reg <= {KV_REQ_ENTRY_W{1'b0}};
        req_prio_reg <= {KV_REQ_PRIO_W{1'b0}};
        req_key_reg <= {KEY_PAD{1'b0}};
        req_mask_reg <= {KEY_PAD{1'b0}};
        req_value_reg <= {VALUE_W{1'b0}};
        cnt_shadow_reg <= {NUM_COUNTERS*32{1'b0}};
        cl_dropped_shadow_reg <= 32'd0;
        cl_word_reg <= {CL_IB{1'b0}};
    end
end

assign reg_wr_resp = (wr_sel == WR_NONE || (go && busy_reg) || req_locked) ? RESP_SLVERR : RESP_OKAY;

always @(posedge clk) begin
    // mailbox
    if (m_axis_req_tready) begin
        req_valid_reg <= 1'b0;
    end
    if (go_ok) begin
        req_valid_reg <= 1'b1;
        busy_reg <= 1'b1;
        done_reg <= 1'b0;
        tag_reg <= tag_reg + 1'b1;
    end
    if (abort) begin
        busy_reg <= 1'b0;
    end
    if (rsp_take) begin
        rsp_reg <= s_axis_rsp_tdata;
        rsp_tag_reg <= s_axis_rsp_tuser;
        busy_reg <= 1'b0;
        done_reg <= 1'b1;
    end

    // sticky errors: a new error wins over CTRL.CLR_ERR in the same cycle
    if (clr_err) begin
        err_go_busy_reg <= 1'b0;
        err_req_locked_reg <= 1'b0;
        err_unexpected_rsp_reg <= 1'b0;
        err_bad_addr_reg <= 1'b0;
    end
    if (go && busy_reg) begin
        err_go_busy_reg <= 1'b1;
    end
    if (req_locked) begin
        err_req_locked_reg <= 1'b1;
    end
    if (rsp_bad) begin
        err_unexpected_rsp_reg <= 1'b1;
    end
    if ((wr_en && wr_sel == WR_NONE) || (rd_en && !rd_ok)) begin
        err_bad_addr_reg <= 1'b1;
    end

    if (rst) begin
        rsp_reg <= {KV_RSP_W{1'b0}};
        rsp_tag_reg <= {TAG_W{1'b0}};
        tag_reg <= {TAG_W{1'b0}};
        req_valid_reg <= 1'b0;
        busy_reg <= 1'b0;
        done_reg <= 1'b0;
        err_go_busy_reg <= 1'b0;
        err_req_locked_reg <= 1'b0;
        err_unexpected_rsp_reg <= 1'b0;
        err_bad_addr_reg <= 1'b0;
    end
end

// awprot/arprot are not used; the upper address bits and bits 1:0 are ignored
wire unused = &{1'b0, reg_wr_prot, reg_rd_prot, reg_wr_addr, reg_rd_addr};

endmodule

`resetall
