/*

pynq-kv: memcached binary request decoder

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Turns one walker item (kv_mc_rx) per cycle into an engine request and a
 * response descriptor (docs/frontend.md §4.1-§4.3), registered.
 *
 * Checks, in the order of frontend.md §4.1 (steps 1-3 are the walker's item
 * kinds): extras + key length > body → 0x0004; opcode not in §4.2 → 0x0081;
 * extras / key / value lengths not as §4.2 (key 1..MAX_KEY) → 0x0004;
 * SET/SETQ/DELETE/DELETEQ with CAS != 0 → 0x0004; SET/SETQ with flags or
 * expiration != 0 → 0x0004; SET/SETQ value longer than MAX_VALUE → 0x0003.
 * A request that passes becomes the engine operation: GET for the four GETs,
 * SET, DEL, LOOKUP for MATCH, nothing for NOOP and VERSION.  The engine key is
 * [L] ‖ key ‖ zeros and the value [M] ‖ value ‖ zeros (engine.md §2),
 * big-endian: byte 0 (the length) in the most significant bits.
 *
 * Descriptor (o_d_*), what kv_mc_fmt needs to answer: response kind, opcode,
 * opaque, the GETK key echo / quiet flags, an error code, the key (lane
 * order: byte 0 at bits 7:0) and its length, and o_d_last on the item that
 * ends the datagram.  o_eng says the item also goes to the engine.
 *
 * Statistics (one-cycle pulses when an item is taken): stat_req_binary
 * (frontend.md requests_binary: items whose header was complete and whose
 * magic was right), stat_bad_magic, stat_truncated.
 */
module kv_mc_dec #
(
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: multiple of 32, 32 to 512
    parameter VALUE_W = 32,
    // Request bytes of a walker item: 32 + KEY_W/8-1 + VALUE_W/8-1 (checked)
    parameter REQ_BYTES = 32 + KEY_W/8 - 1 + VALUE_W/8 - 1
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * Walker items
     */
    input  wire [2:0]                s_item_kind,
    input  wire                      s_item_last,
    input  wire [8*REQ_BYTES-1:0]    s_item_data,
    input  wire [15:0]               s_item_cnt,
    input  wire                      s_item_valid,
    output wire                      s_item_ready,

    /*
     * Decoded: engine operation and response descriptor
     */
    output wire                      o_valid,
    input  wire                      o_ready,
    output wire                      o_eng,
    output wire [4:0]                o_eop,
    output wire [KEY_W-1:0]          o_ekey,
    output wire [VALUE_W-1:0]        o_evalue,
    output wire                      o_d_last,
    output wire [3:0]                o_d_rk,
    output wire [7:0]                o_d_opcode,
    output wire [31:0]               o_d_opaque,
    output wire                      o_d_flag,
    output wire                      o_d_quiet,
    output wire [3:0]                o_d_code,
    output wire [7:0]                o_d_kl,
    output wire [KEY_W-9:0]          o_d_key,

    /*
     * Statistics
     */
    output wire                      stat_req_binary,
    output wire                      stat_bad_magic,
    output wire                      stat_truncated
);

`include "kv_regs.vh"
`include "kv_mc_defs.vh"

localparam KB = KEY_W / 8;
localparam VB = VALUE_W / 8;
localparam MAX_KEY = KB - 1;
localparam MAX_VALUE = VB - 1;

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
    if (REQ_BYTES != 32 + MAX_KEY + MAX_VALUE) begin
        $error("Error: REQ_BYTES must be 32 + KEY_W/8-1 + VALUE_W/8-1 (instance %m)");
        $finish;
    end
end

/*
 * header fields
 */
function [7:0] byte_at(input [8*REQ_BYTES-1:0] d, input integer i);
    begin
        byte_at = d[8*i +: 8];
    end
endfunction

wire [7:0] opcode = byte_at(s_item_data, MC_HDR_OPCODE);
wire [15:0] key_len = {byte_at(s_item_data, MC_HDR_KEY_LEN), byte_at(s_item_data, MC_HDR_KEY_LEN + 1)};
wire [7:0] ext_len = byte_at(s_item_data, MC_HDR_EXT_LEN);
wire [31:0] body_len = {byte_at(s_item_data, MC_HDR_BODY_LEN), byte_at(s_item_data, MC_HDR_BODY_LEN + 1),
                        byte_at(s_item_data, MC_HDR_BODY_LEN + 2), byte_at(s_item_data, MC_HDR_BODY_LEN + 3)};
wire [31:0] opaque = {byte_at(s_item_data, MC_HDR_OPAQUE), byte_at(s_item_data, MC_HDR_OPAQUE + 1),
                      byte_at(s_item_data, MC_HDR_OPAQUE + 2), byte_at(s_item_data, MC_HDR_OPAQUE + 3)};
wire [63:0] cas = s_item_data[8*MC_HDR_CAS +: 64];
wire [63:0] flags_exp = s_item_data[8*MC_HDR_BYTES +: 64];     // SET extras

wire [32:0] ext_key = {25'd0, ext_len} + {17'd0, key_len};
wire inconsistent = ext_key > {1'b0, body_len};
wire [32:0] value_len = {1'b0, body_len} - ext_key;    // when consistent

wire is_get = opcode == 8'h00 || opcode == 8'h09 || opcode == 8'h0c || opcode == 8'h0d;
wire is_set = opcode == 8'h01 || opcode == 8'h11;
wire is_del = opcode == 8'h04 || opcode == 8'h14;
wire is_noop = opcode == 8'h0a;
wire is_version = opcode == 8'h0b;
wire is_match = opcode == 8'hc0;
wire known = is_get || is_set || is_del || is_noop || is_version || is_match;
wire quiet = opcode == 8'h09 || opcode == 8'h0d || opcode == 8'h11 || opcode == 8'h14;
wire key_echo = opcode == 8'h0c || opcode == 8'h0d;

wire needs_key = !(is_noop || is_version);
wire [7:0] shape_ext = is_set ? 8'd8 : 8'd0;
wire shape_bad = ext_len != shape_ext || (key_len != 16'd0) != needs_key ||
                 (value_len != 33'd0 && !is_set);
wire key_long = {16'd0, key_len} > MAX_KEY;
wire cas_bad = (is_set || is_del) && cas != 64'd0;
wire flags_bad = is_set && flags_exp != 64'd0;
wire [31:0] max_value32 = MAX_VALUE;
wire value_big = is_set && value_len > {1'b0, max_value32};

/*
 * key and value bytes; the key starts at 24 + extras (24, or 32 for SET)
 */
wire [7:0] kl = key_len[7:0];
wire [7:0] vl = value_len[7:0];
wire [8*REQ_BYTES-1:0] key_src = is_set ? (s_item_data >> 256) : (s_item_data >> 192);
wire [8*REQ_BYTES-1:0] val_src = (s_item_data >> 256) >> {kl, 3'b000};

reg [8*MAX_KEY-1:0] key_bytes;     // lane order, masked to the key length
reg [KEY_W-1:0] ekey;
reg [VALUE_W-1:0] evalue;
integer j;
always @* begin
    for (j = 0; j < MAX_KEY; j = j + 1) begin
        key_bytes[8*j +: 8] = (j < kl) ? key_src[8*j +: 8] : 8'd0;
        ekey[KEY_W-9-8*j -: 8] = key_bytes[8*j +: 8];
    end
    ekey[KEY_W-1 -: 8] = kl;
    for (j = 0; j < MAX_VALUE; j = j + 1) begin
        evalue[VALUE_W-9-8*j -: 8] = (j < vl) ? val_src[8*j +: 8] : 8'd0;
    end
    evalue[VALUE_W-1 -: 8] = vl;
end

/*
 * decision
 */
reg eng;
reg [4:0] eop;
reg [3:0] rk;
reg [3:0] code;
reg req_binary;
always @* begin
    eng = 1'b0;
    eop = KV_OP_GET;
    rk = MC_RK_NONE;
    code = MC_E_INVAL;
    req_binary = 1'b0;
    case (s_item_kind)
        MC_K_BIN, MC_K_BIG: begin
            req_binary = 1'b1;
            rk = MC_RK_ERR;
            if (inconsistent) begin
                code = MC_E_INVAL;
            end else if (!known) begin
                code = MC_E_UNKNOWN;
            end else if (shape_bad || key_long || cas_bad || flags_bad) begin
                code = MC_E_INVAL;
            end else if (value_big) begin
                code = MC_E_TOOLARGE;
            end else if (is_noop) begin
                rk = MC_RK_NOOP;
            end else if (is_version) begin
                rk = MC_RK_VERSION;
            end else begin
                // a request that passed every check is short enough to be whole (MC_K_BIN)
                eng = 1'b1;
                if (is_get) begin
                    rk = MC_RK_GET;
                    eop = KV_OP_GET;
                end else if (is_set) begin
                    rk = MC_RK_SET;
                    eop = KV_OP_SET;
                end else if (is_del) begin
                    rk = MC_RK_DEL;
                    eop = KV_OP_DEL;
                end else begin
                    rk = MC_RK_MATCH;
                    eop = KV_OP_LOOKUP;
                end
            end
        end
        MC_K_TRUNC: begin
            // the header is complete: answered 0x0004 (body cut short); else silent
            if (s_item_cnt >= MC_HDR_BYTES) begin
                req_binary = 1'b1;
                rk = MC_RK_ERR;
                code = MC_E_INVAL;
            end
        end
        default: begin
            // MC_K_MAGIC, MC_K_EMPTY, dropped datagrams: nothing to answer
        end
    endcase
end

/*
 * output register
 */
reg o_valid_reg;
reg o_eng_reg;
reg [4:0] o_eop_reg;
reg [KEY_W-1:0] o_ekey_reg;
reg [VALUE_W-1:0] o_evalue_reg;
reg o_d_last_reg;
reg [3:0] o_d_rk_reg;
reg [7:0] o_d_opcode_reg;
reg [31:0] o_d_opaque_reg;
reg o_d_flag_reg;
reg o_d_quiet_reg;
reg [3:0] o_d_code_reg;
reg [7:0] o_d_kl_reg;
reg [8*MAX_KEY-1:0] o_d_key_reg;
reg stat_req_binary_reg;
reg stat_bad_magic_reg;
reg stat_truncated_reg;

assign s_item_ready = !o_valid_reg || o_ready;
wire take = s_item_valid && s_item_ready;

assign o_valid = o_valid_reg;
assign o_eng = o_eng_reg;
assign o_eop = o_eop_reg;
assign o_ekey = o_ekey_reg;
assign o_evalue = o_evalue_reg;
assign o_d_last = o_d_last_reg;
assign o_d_rk = o_d_rk_reg;
assign o_d_opcode = o_d_opcode_reg;
assign o_d_opaque = o_d_opaque_reg;
assign o_d_flag = o_d_flag_reg;
assign o_d_quiet = o_d_quiet_reg;
assign o_d_code = o_d_code_reg;
assign o_d_kl = o_d_kl_reg;
assign o_d_key = o_d_key_reg;
assign stat_req_binary = stat_req_binary_reg;
assign stat_bad_magic = stat_bad_magic_reg;
assign stat_truncated = stat_truncated_reg;

always @(posedge clk) begin
    if (o_ready) begin
        o_valid_reg <= 1'b0;
    end
    stat_req_binary_reg <= 1'b0;
    stat_bad_magic_reg <= 1'b0;
    stat_truncated_reg <= 1'b0;
    if (take) begin
        o_valid_reg <= 1'b1;
        o_eng_reg <= eng;
        o_eop_reg <= eop;
        o_ekey_reg <= ekey;
        o_evalue_reg <= evalue;
        o_d_last_reg <= s_item_last;
        o_d_rk_reg <= rk;
        o_d_opcode_reg <= opcode;
        o_d_opaque_reg <= opaque;
        o_d_flag_reg <= key_echo;
        o_d_quiet_reg <= quiet;
        o_d_code_reg <= code;
        o_d_kl_reg <= kl;
        o_d_key_reg <= key_bytes;
        stat_req_binary_reg <= req_binary;
        stat_bad_magic_reg <= s_item_kind == MC_K_MAGIC;
        stat_truncated_reg <= s_item_kind == MC_K_TRUNC;
    end
    if (rst) begin
        o_valid_reg <= 1'b0;
        stat_req_binary_reg <= 1'b0;
        stat_bad_magic_reg <= 1'b0;
        stat_truncated_reg <= 1'b0;
    end
end

wire unused = &{1'b0, value_len[32:8], key_len[15:8]};

endmodule

`resetall
