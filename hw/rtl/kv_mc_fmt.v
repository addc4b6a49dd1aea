/*

pynq-kv: memcached response formatter and reply datagram packer

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Takes the response descriptors in request order, with the engine response
 * of each descriptor that went to the engine, and sends the responses that
 * are not suppressed packed into reply datagrams (docs/frontend.md §3,
 * §5-§7): each datagram is the 8-byte frame header (request id, 0, 1, 0)
 * followed by whole responses back to back, at most MAX_DGRAM bytes; a
 * response that would not fit closes the datagram and opens the next, and
 * the request datagram's last descriptor closes the current one.
 *
 * Pipeline:
 *   P  plan: status, lengths, header and extras, the wire value, the fixed
 *      strings; the metadata FIFO is popped with the datagram's last
 *      descriptor
 *   R  the response assembled in one register (fixed part | key << koff |
 *      tail << toff), handed to the packer BYTES bytes (one chunk) a cycle
 *   K  packer: a byte accumulator that appends each chunk behind the bytes
 *      already there (and the frame header in front of a datagram's first
 *      response), sends a beat whenever more than BYTES bytes are held and
 *      the held bytes with tlast when the datagram closes
 * A response of at most BYTES bytes passes in one cycle, so with a 512-bit
 * stream GET responses are packed at one per cycle.  Latency from descriptor
 * (and engine response) to a reply beat: 3 cycles.
 *
 * Wire values (frontend.md §4.3): a raw value whose first byte M is at most
 * MAX_VALUE is the M bytes after it; otherwise the whole raw value.
 *
 * Reply budget (frontend.md §10): a request datagram of L payload bytes
 * (s_meta_data's payload_len) from a source with budget multiplier M
 * (s_meta_budget, 0: none) may draw B = M x L reply bytes, frame headers
 * included.  Before the packer takes a response's first chunk it computes S,
 * the reply bytes of the request datagram so far plus the response plus 8 if
 * the response opens a reply datagram; if S > B and a response of this
 * request datagram has been packed already, the response in R is replaced
 * (one cycle) by the budget reply -- binary: its opcode and opaque, status
 * 0x0085, body "Use TCP"; text: SERVER_ERROR reply exceeds UDP budget; use
 * TCP -- which is then packed like any response, and every later response of
 * the request datagram is withheld (their descriptors and engine responses
 * are still taken, and the last one still closes the reply datagram).
 *
 * Statistics (pulses): stat_response (a response sent), stat_error (an error
 * response of §7, the budget reply included), stat_datagram (a reply
 * datagram closed), stat_budget (a request datagram's replies cut).
 */
module kv_mc_fmt #
(
    // Reply stream width in bits: 64, 128, 256 or 512
    parameter DATA_W = 512,
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: multiple of 32, 32 to 512
    parameter VALUE_W = 32,
    // Per-datagram metadata bits: >= 16, payload length in [15:0]
    // (kv_eth_if's metadata is 129)
    parameter META_W = 129,
    // Longest reply datagram in bytes, frame header included: 256 to 65507
    // (frontend.md §3: 1400); no response is ever longer than 242
    parameter MAX_DGRAM = 1400
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * Response descriptors (kv_mc_dec / kv_mc_text o_d_*)
     */
    input  wire                      s_d_valid,
    output wire                      s_d_ready,
    input  wire                      s_d_last,
    input  wire                      s_d_eng,
    input  wire [3:0]                s_d_rk,
    input  wire [7:0]                s_d_opcode,
    input  wire [31:0]               s_d_opaque,
    input  wire                      s_d_flag,
    input  wire                      s_d_quiet,
    input  wire [3:0]                s_d_code,
    input  wire [7:0]                s_d_kl,
    input  wire [KEY_W-9:0]          s_d_key,

    /*
     * Engine responses of the descriptors with s_d_eng (fields of kv_regs.vh)
     */
    input  wire [3:0]                s_rsp_status,
    input  wire [11:0]               s_rsp_entry,
    input  wire [VALUE_W-1:0]        s_rsp_value,
    input  wire                      s_rsp_valid,
    output wire                      s_rsp_ready,

    /*
     * Per-datagram metadata and request id (kv_mc_rx m_meta_*), and the
     * budget multiplier of the datagram's source (kv_mc_admit)
     */
    input  wire [META_W+15:0]        s_meta_data,
    input  wire [7:0]                s_meta_budget,
    input  wire                      s_meta_valid,
    output wire                      s_meta_ready,

    /*
     * Reply datagrams
     */
    output wire [DATA_W-1:0]         m_axis_tdata,
    output wire [DATA_W/8-1:0]       m_axis_tkeep,
    output wire                      m_axis_tvalid,
    input  wire                      m_axis_tready,
    output wire                      m_axis_tlast,
    output wire [META_W-1:0]         m_axis_meta,

    /*
     * Statistics
     */
    output wire                      stat_response,
    output wire                      stat_error,
    output wire                      stat_datagram,
    output wire                      stat_budget
);

`include "kv_mc_defs.vh"

function integer imax(input integer a, input integer b);
    begin
        imax = a > b ? a : b;
    end
endfunction

localparam BYTES = DATA_W / 8;
localparam KB = KEY_W / 8;
localparam VB = VALUE_W / 8;
localparam MAX_KEY = KB - 1;
localparam MAX_VALUE = VB - 1;
localparam FB = 32;                                   // fixed part: header, extras
localparam TB = imax(VB + 9, 72);                     // tail: value, strings, text VALUE tail
localparam RB0 = imax(28 + MAX_KEY + VB, 72);         // longest response
localparam NCH = (RB0 + BYTES - 1) / BYTES;           // chunks of the longest response
localparam RB = NCH * BYTES;
localparam CHW = $clog2(NCH + 1);
localparam FW = $clog2(BYTES + 1);
localparam [15:0] MAX_DGRAM16 = 16'd0 + MAX_DGRAM;
localparam [15:0] BUD_BIN_LEN = 16'd31;                // budget replies: binary (header + "Use TCP")
localparam [15:0] BUD_TXT_LEN = 16'd48;                // text

// fixed strings (message ids)
localparam [4:0]
    M_NOTFOUND = 5'd0,      // binary bodies
    M_TOOLARGE = 5'd1,
    M_INVAL = 5'd2,
    M_UNKNOWN = 5'd3,
    M_NOMEM = 5'd4,
    M_VERSION = 5'd5,
    M_T_ERROR = 5'd6,       // text replies (MC_RK_TMSG code c is M_T_ERROR + c)
    M_T_BADFMT = 5'd7,
    M_T_DELUSAGE = 5'd8,
    M_T_FLAGS = 5'd9,
    M_T_BADCHUNK = 5'd10,
    M_T_TOOLARGE = 5'd11,
    M_T_VERSION = 5'd12,
    M_T_END = 5'd13,
    M_T_STORED = 5'd14,
    M_T_DELETED = 5'd15,
    M_T_NOTFOUND = 5'd16,
    M_T_NOMEM = 5'd17,
    M_NONE = 5'd31;

// check configuration
initial begin
    if (DATA_W != 64 && DATA_W != 128 && DATA_W != 256 && DATA_W != 512) begin
        $error("Error: DATA_W must be 64, 128, 256 or 512 (instance %m)");
        $finish;
    end
    if (KEY_W != 144 && KEY_W != 288 && KEY_W != 576 && KEY_W != 1152) begin
        $error("Error: KEY_W must be 144, 288, 576 or 1152 (instance %m)");
        $finish;
    end
    if (VALUE_W % 32 != 0 || VALUE_W < 32 || VALUE_W > 512) begin
        $error("Error: VALUE_W must be a multiple of 32 from 32 to 512 (instance %m)");
        $finish;
    end
    if (META_W < 16) begin
        $error("Error: META_W must be at least 16 (instance %m)");
        $finish;
    end
    if (RB0 > 255) begin
        $error("Error: a response must fit 255 bytes (the packer compares 8-bit lengths) (instance %m)");
        $finish;
    end
    if (MAX_DGRAM < 256 || MAX_DGRAM > 65507) begin
        $error("Error: MAX_DGRAM must be 256 to 65507 (instance %m)");
        $finish;
    end
end

/*
 * fixed strings, byte 0 in bits 7:0
 */
function [8*TB-1:0] lanes(input [8*72-1:0] s, input integer n);
    integer i;
    begin
        lanes = {8*TB{1'b0}};
        for (i = 0; i < n; i = i + 1) begin
            lanes[8*i +: 8] = s[8*(n-1-i) +: 8];
        end
    end
endfunction

// a message's length and bytes
function [8*TB+7:0] msg(input [4:0] id);
    begin
        case (id)
            M_NOTFOUND:   msg = {8'd9, lanes("Not found", 9)};
            M_TOOLARGE:   msg = {8'd10, lanes("Too large.", 10)};
            M_INVAL:      msg = {8'd17, lanes("Invalid arguments", 17)};
            M_UNKNOWN:    msg = {8'd15, lanes("Unknown command", 15)};
            M_NOMEM:      msg = {8'd13, lanes("Out of memory", 13)};
            M_VERSION:    msg = {8'd9, lanes("pynq-kv-1", 9)};
            M_T_ERROR:    msg = {8'd7, lanes("ERROR\015\012", 7)};
            M_T_BADFMT:   msg = {8'd38, lanes("CLIENT_ERROR bad command line format\015\012", 38)};
            M_T_DELUSAGE: msg = {8'd70, lanes("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\015\012", 70)};
            M_T_FLAGS:    msg = {8'd53, lanes("CLIENT_ERROR nonzero flags or exptime not supported\015\012", 53)};
            M_T_BADCHUNK: msg = {8'd29, lanes("CLIENT_ERROR bad data chunk\015\012", 29)};
            M_T_TOOLARGE: msg = {8'd41, lanes("SERVER_ERROR object too large for cache\015\012", 41)};
            M_T_VERSION:  msg = {8'd19, lanes("VERSION pynq-kv-1\015\012", 19)};
            M_T_END:      msg = {8'd5, lanes("END\015\012", 5)};
            M_T_STORED:   msg = {8'd8, lanes("STORED\015\012", 8)};
            M_T_DELETED:  msg = {8'd9, lanes("DELETED\015\012", 9)};
            M_T_NOTFOUND: msg = {8'd11, lanes("NOT_FOUND\015\012", 11)};
            M_T_NOMEM:    msg = {8'd43, lanes("SERVER_ERROR out of memory storing object\015\012", 43)};
            default:      msg = {8'd0, {8*TB{1'b0}}};
        endcase
    end
endfunction

// its length alone (the bytes of `entry` are not needed here)
/* verilator lint_off UNUSEDSIGNAL */
function [7:0] msg_len_of(input [4:0] id);
    reg [8*TB+7:0] entry;
    begin
        entry = msg(id);
        msg_len_of = entry[8*TB +: 8];
    end
endfunction
/* verilator lint_on UNUSEDSIGNAL */

reg [4:0] msg_id;
wire [8*TB+7:0] msg_now = msg(msg_id);
wire [8*TB-1:0] msg_bytes = msg_now[8*TB-1:0];
wire [7:0] msg_len = msg_now[8*TB +: 8];

// a binary response's header and message length, 24 + the message's, as a table of constants: the
// reply length then needs no adder in front of its sum
wire [8*32-1:0] hdr_msg_len;
genvar g;
generate
    for (g = 0; g < 32; g = g + 1) begin : g_hdr_msg_len
        localparam [4:0] ID = g;
        assign hdr_msg_len[8*g +: 8] = MC_HDR_BYTES[7:0] + msg_len_of(ID);
    end
endgenerate

/*
 * P stage: plan the reply
 */
wire need_rsp = s_d_eng;
wire p_take;
assign s_d_ready = p_take;
assign s_rsp_ready = p_take && need_rsp;
assign s_meta_ready = p_take && s_d_last;

// wire value of the engine response
wire [7:0] raw_len = s_rsp_value[VALUE_W-1 -: 8];
wire [31:0] vb32 = VB;
wire is_tagged = {24'd0, raw_len} <= MAX_VALUE;
wire [7:0] vl = is_tagged ? raw_len : vb32[7:0];
wire [VALUE_W-1:0] raw_tail = s_rsp_value << 8;   // the raw value without its length byte
reg [8*VB-1:0] vdata;               // lane order, zero beyond vl
integer i;
always @* begin
    for (i = 0; i < VB; i = i + 1) begin
        if (is_tagged) begin
            vdata[8*i +: 8] = (i < raw_len) ? raw_tail[VALUE_W-1-8*i -: 8] : 8'd0;
        end else begin
            vdata[8*i +: 8] = s_rsp_value[VALUE_W-1-8*i -: 8];
        end
    end
end
wire [8*TB-1:0] vdata_x = {{(8*TB-8*VB){1'b0}}, vdata};

// text VALUE unit tail: " 0 <vl>\r\n<data>\r\n"
wire [7:0] vl_tens = (vl >= 8'd60) ? 8'd6 : (vl >= 8'd50) ? 8'd5 : (vl >= 8'd40) ? 8'd4 :
                     (vl >= 8'd30) ? 8'd3 : (vl >= 8'd20) ? 8'd2 : (vl >= 8'd10) ? 8'd1 : 8'd0;
wire [7:0] vl_ones = vl - vl_tens * 8'd10;
wire two_digits = is_tagged ? raw_len >= 8'd10 : vb32 >= 32'd10;   // vl >= 10, from the input
reg [8*TB-1:0] vdata_crlf;          // the data then "\r\n"
always @* begin
    for (i = 0; i < TB; i = i + 1) begin
        if (i < vl) begin
            vdata_crlf[8*i +: 8] = vdata_x[8*i +: 8];
        end else if (i == {24'd0, vl}) begin
            vdata_crlf[8*i +: 8] = 8'h0d;
        end else if (i == {24'd0, vl} + 1) begin
            vdata_crlf[8*i +: 8] = 8'h0a;
        end else begin
            vdata_crlf[8*i +: 8] = 8'd0;
        end
    end
end
wire [8*TB-1:0] tval_head = two_digits ?
    {{(8*TB-56){1'b0}}, 8'h0a, 8'h0d, 8'h30 + vl_ones, 8'h30 + vl_tens, 8'h20, 8'h30, 8'h20} :
    {{(8*TB-48){1'b0}}, 8'h0a, 8'h0d, 8'h30 + vl_ones, 8'h20, 8'h30, 8'h20};
wire [8*TB-1:0] tval_tail = tval_head | (two_digits ? (vdata_crlf << 56) : (vdata_crlf << 48));

reg send;
reg binary;
reg [15:0] status;
reg [7:0] keylen_out;
reg [7:0] ext_len;
reg [63:0] extras;                  // lane order
reg key_on;
reg [1:0] koff_sel;                 // key at 0: 6 (text), 1: 24, 2: 28
reg [1:0] tail_sel;                 // 0: string, 1: value, 2: text VALUE tail
reg [7:0] tbase;
reg is_error;

always @* begin
    send = 1'b0;
    binary = 1'b1;
    status = 16'h0000;
    keylen_out = 8'd0;
    ext_len = 8'd0;
    extras = 64'd0;
    key_on = 1'b0;
    koff_sel = 2'd1;
    tail_sel = 2'd0;
    tbase = 8'd24;
    msg_id = M_NONE;
    is_error = 1'b0;
    case (s_d_rk)
        MC_RK_GET: begin
            if (s_rsp_status == 4'd1) begin
                send = 1'b1;
                ext_len = 8'd4;
                key_on = s_d_flag;
                keylen_out = s_d_flag ? s_d_kl : 8'd0;
                koff_sel = 2'd2;
                tail_sel = 2'd1;
                tbase = 8'd28;
            end else begin
                send = !s_d_quiet;
                status = 16'h0001;
                if (s_d_flag) begin
                    key_on = 1'b1;
                    keylen_out = s_d_kl;
                end else begin
                    msg_id = M_NOTFOUND;
                end
            end
        end
        MC_RK_SET: begin
            if (s_rsp_status == 4'd3) begin
                send = 1'b1;
                status = 16'h0082;
                msg_id = M_NOMEM;
                is_error = 1'b1;
            end else begin
                send = !s_d_quiet;
            end
        end
        MC_RK_DEL: begin
            if (s_rsp_status == 4'd1) begin
                send = 1'b1;
                status = 16'h0001;
                msg_id = M_NOTFOUND;
            end else begin
                send = !s_d_quiet;
            end
        end
        MC_RK_MATCH: begin
            send = 1'b1;
            if (s_rsp_status == 4'd1 || s_rsp_status == 4'd2) begin
                ext_len = 8'd8;
                extras[7:0] = {6'd0, s_rsp_status[1:0]};
                extras[63:32] = (s_rsp_status == 4'd2) ?
                    {s_rsp_entry[7:0], 4'd0, s_rsp_entry[11:8], 16'd0} : 32'hFFFFFFFF;
                tail_sel = 2'd1;
                tbase = 8'd32;
            end else begin
                status = 16'h0001;
                msg_id = M_NOTFOUND;
            end
        end
        MC_RK_NOOP: begin
            send = 1'b1;
        end
        MC_RK_VERSION: begin
            send = 1'b1;
            msg_id = M_VERSION;
        end
        MC_RK_ERR: begin
            send = 1'b1;
            is_error = 1'b1;
            case (s_d_code)
                4'd0: begin status = 16'h0003; msg_id = M_TOOLARGE; end
                4'd2: begin status = 16'h0081; msg_id = M_UNKNOWN; end
                default: begin status = 16'h0004; msg_id = M_INVAL; end
            endcase
        end
        MC_RK_TVALUE: begin
            binary = 1'b0;
            send = s_rsp_status == 4'd1;
            key_on = 1'b1;
            koff_sel = 2'd0;
            tail_sel = 2'd2;
            tbase = 8'd6;
        end
        MC_RK_TEND: begin
            binary = 1'b0;
            send = 1'b1;
            tbase = 8'd0;
            msg_id = M_T_END;
        end
        MC_RK_TSET: begin
            binary = 1'b0;
            tbase = 8'd0;
            if (s_rsp_status == 4'd3) begin
                send = 1'b1;
                msg_id = M_T_NOMEM;
                is_error = 1'b1;
            end else begin
                send = !s_d_flag;
                msg_id = M_T_STORED;
            end
        end
        MC_RK_TDEL: begin
            binary = 1'b0;
            tbase = 8'd0;
            send = !s_d_flag;
            msg_id = (s_rsp_status == 4'd0) ? M_T_DELETED : M_T_NOTFOUND;
        end
        MC_RK_TMSG: begin
            binary = 1'b0;
            tbase = 8'd0;
            send = 1'b1;
            msg_id = M_T_ERROR + {1'b0, s_d_code};
            is_error = s_d_code != 4'd6;      // every text message but VERSION
        end
        MC_RK_NONE: begin
            send = 1'b0;
        end
        default: begin
            send = 1'b0;
        end
    endcase
end

wire [7:0] kl_on = key_on ? s_d_kl : 8'd0;
wire [8*TB-1:0] tail = (tail_sel == 2'd1) ? {{(8*TB-8*VB){1'b0}}, vdata} :
                       (tail_sel == 2'd2) ? tval_tail : msg_bytes;
// binary body = extras + key + value/string; text = "VALUE " + key + tail, or a string. The
// reply length is one four-operand sum with no adder in front: the part fixed by the case (a
// binary response's header and message from the constant table, the text VALUE tail's 14 or 15
// fixed bytes, or a text message), the extras (nonzero only with a value), the key, the value
wire [7:0] vl_add = (tail_sel != 2'd0) ? vl : 8'd0;
wire [7:0] body_c = ext_len + ((tail_sel == 2'd0) ? msg_len : 8'd0);
wire [7:0] len_c = binary ? hdr_msg_len[8*msg_id +: 8] :
                   (tail_sel == 2'd2) ? {7'b0000111, two_digits} : msg_len;
wire [7:0] bin_body = body_c + kl_on + vl_add;
wire [15:0] reply_len = {8'd0, len_c} + {8'd0, ext_len} + {8'd0, kl_on} + {8'd0, vl_add};

// key bytes masked to the key length
reg [8*MAX_KEY-1:0] key_m;
always @* begin
    for (i = 0; i < MAX_KEY; i = i + 1) begin
        key_m[8*i +: 8] = (i < kl_on) ? s_d_key[8*i +: 8] : 8'd0;
    end
end

// binary header and extras; or "VALUE "
wire [8*FB-1:0] fixed_bin = {extras, 64'd0, s_d_opaque[7:0], s_d_opaque[15:8], s_d_opaque[23:16],
                             s_d_opaque[31:24], bin_body, 8'd0, 8'd0, 8'd0, status[7:0], status[15:8],
                             8'd0, ext_len, keylen_out, 8'd0, s_d_opcode, MC_MAGIC_RSP};
wire [8*FB-1:0] fixed_txt = {{(8*FB-48){1'b0}}, (tail_sel == 2'd2) ? 48'h20_45_55_4C_41_56 : 48'd0};

reg p_valid_reg;
reg p_send_reg;
reg p_close_reg;
reg p_err_reg;
reg [8*FB-1:0] p_fixed_reg;
reg [8*MAX_KEY-1:0] p_key_reg;
reg [1:0] p_koff_reg;
reg [8*TB-1:0] p_tail_reg;
reg [7:0] p_toff_reg;
reg [15:0] p_len_reg;
reg [META_W-17:0] p_meta_reg;       // metadata without payload_len
reg [15:0] p_rid_reg;               // request id
reg p_bin_reg;                      // a binary response (else text)
reg p_unl_reg;                      // the source has no budget (M = 0)
reg [23:0] p_bud_reg;               // its budget B = M x L in bytes

wire r_load;
wire p_free = !p_valid_reg || r_load || !(p_send_reg || p_close_reg);
assign p_take = s_d_valid && (!need_rsp || s_rsp_valid) && s_meta_valid && p_free;

always @(posedge clk) begin
    if (p_valid_reg && (r_load || !(p_send_reg || p_close_reg))) begin
        p_valid_reg <= 1'b0;
    end
    if (p_take) begin
        p_valid_reg <= 1'b1;
        p_send_reg <= send;
        p_close_reg <= s_d_last;
        p_err_reg <= is_error;
        p_fixed_reg <= binary ? fixed_bin : fixed_txt;
        p_key_reg <= key_m;
        p_koff_reg <= koff_sel;
        p_tail_reg <= tail;
        p_toff_reg <= tbase + kl_on;
        p_len_reg <= reply_len;
        p_meta_reg <= s_meta_data[META_W+15:32];
        p_rid_reg <= s_meta_data[15:0];
        p_bin_reg <= binary;
        p_unl_reg <= s_meta_budget == 8'd0;
        p_bud_reg <= s_meta_budget * s_meta_data[31:16];
    end
    if (rst) begin
        p_valid_reg <= 1'b0;
    end
end

/*
 * R stage: the response, whole
 */
wire [8*RB-1:0] rec_fixed = {{(8*RB-8*FB){1'b0}}, p_fixed_reg};
wire [8*RB-1:0] rec_key0 = {{(8*RB-8*MAX_KEY){1'b0}}, p_key_reg};
wire [8*RB-1:0] rec_key = (p_koff_reg == 2'd0) ? (rec_key0 << 48) :
                          (p_koff_reg == 2'd1) ? (rec_key0 << 192) : (rec_key0 << 224);
wire [8*RB-1:0] rec_tail = {{(8*RB-8*TB){1'b0}}, p_tail_reg} << {p_toff_reg, 3'b000};

reg r_valid_reg;
reg r_send_reg;
reg r_close_reg;
reg r_err_reg;
reg [8*RB-1:0] r_rec_reg;
reg [15:0] r_len_reg;
reg [CHW-1:0] r_ptr_reg;            // next chunk
// the chunk at r_ptr, kept beside the pointer so that the packer starts from registers: the
// response's bytes from it on, whether it is the last, and its bytes
reg [15:0] r_rest_reg;
reg r_clast_reg;
reg [FW-1:0] r_chn_reg;
reg [META_W-17:0] r_meta_reg;
reg [15:0] r_rid_reg;
reg r_bin_reg;
reg r_unl_reg;
reg [23:0] r_bud_reg;
reg r_isbud_reg;                    // the record is the budget reply

wire r_done;
wire cut;                           // the budget reply replaces the record this cycle
wire [8*RB-1:0] bud_rec;
wire [15:0] bud_len;
assign r_load = p_valid_reg && (p_send_reg || p_close_reg) && (!r_valid_reg || r_done);

always @(posedge clk) begin
    if (r_done) begin
        r_valid_reg <= 1'b0;
    end
    if (r_load) begin
        r_valid_reg <= 1'b1;
        r_send_reg <= p_send_reg;
        r_close_reg <= p_close_reg;
        r_err_reg <= p_err_reg;
        r_rec_reg <= rec_fixed | rec_key | rec_tail;
        r_len_reg <= p_len_reg;
        r_meta_reg <= p_meta_reg;
        r_rid_reg <= p_rid_reg;
        r_bin_reg <= p_bin_reg;
        r_unl_reg <= p_unl_reg;
        r_bud_reg <= p_bud_reg;
        r_isbud_reg <= 1'b0;
    end
    if (cut) begin
        r_err_reg <= 1'b1;
        r_rec_reg <= bud_rec;
        r_len_reg <= bud_len;
        r_isbud_reg <= 1'b1;
    end
    if (rst) begin
        r_valid_reg <= 1'b0;
    end
end

// the chunk at r_ptr and its bytes
reg [DATA_W-1:0] chunk;
integer c;
always @* begin
    chunk = {DATA_W{1'b0}};
    for (c = 0; c < NCH; c = c + 1) begin
        if ({{(32-CHW){1'b0}}, r_ptr_reg} == c) begin
            chunk = r_rec_reg[DATA_W*c +: DATA_W];
        end
    end
end
wire ch_last = r_clast_reg;
wire ch_first = r_ptr_reg == {CHW{1'b0}};
wire [FW-1:0] ch_n = r_chn_reg;
// the next chunk's registers, worked out for each source before the choice (which comes late):
// a response's first chunk (a load, or the budget reply), or the chunk after a full one
wire [15:0] rest_adv = r_rest_reg - bytes32[15:0];
wire last_load = p_len_reg <= bytes32[15:0];
wire last_bud = bud_len <= bytes32[15:0];
wire last_adv = rest_adv <= bytes32[15:0];
wire [FW-1:0] chn_load = last_load ? p_len_reg[FW-1:0] : bytes32[FW-1:0];
wire [FW-1:0] chn_bud = last_bud ? bud_len[FW-1:0] : bytes32[FW-1:0];
wire [FW-1:0] chn_adv = last_adv ? rest_adv[FW-1:0] : bytes32[FW-1:0];

/*
 * K: packer
 */
reg [DATA_W-1:0] acc_reg;           // bytes of the open datagram not sent yet (f of them)
reg [FW-1:0] f_reg;
reg open_reg;
reg [15:0] room_reg;                // bytes the open datagram can still take (MAX_DGRAM less its
                                    // bytes, frame header included): a response overflows it when
                                    // longer, one comparison with no adder in front
reg room_small_reg;                 // room_reg < 256 (responses are at most 255 bytes: RB0)
reg pend_close_reg;                 // close the datagram next cycle
reg [META_W-17:0] k_meta_reg;
reg [15:0] k_rid_reg;

reg o_valid_reg;
reg [DATA_W-1:0] o_data_reg;
reg [BYTES-1:0] o_keep_reg;
reg o_last_reg;
reg [META_W-1:0] o_meta_reg;
reg stat_response_reg;
reg stat_error_reg;
reg stat_datagram_reg;
reg stat_budget_reg;

// reply budget of the request datagram whose responses are in R, kept as what is left of it
// (B less its reply bytes so far, frame headers included; negative once over) so that the budget
// test is one comparison with the response length
reg [25:0] left_reg;                // B - S0, two's complement (S0: bytes so far)
reg left_small_reg;                 // 0 <= left_reg < 256
// the same for B - S0 - 8 (a response that opens a reply datagram): its sign, whether it is
// 0 to 255, and its low byte
reg left8_neg_reg;
reg left8_small_reg;
reg [7:0] left8_lo_reg;
reg sent_reg;                       // one of its responses has been packed (left_* hold)
reg cut_reg;                        // its replies are cut: only the budget reply is packed

wire k_send = r_send_reg && (!cut_reg || r_isbud_reg);
wire o_free = !o_valid_reg || m_axis_tready;
wire [31:0] bytes32 = BYTES;
wire opening = ch_first && !open_reg;
wire [63:0] frame_hdr = {8'd0, 8'd0, 8'h01, 8'd0, 8'd0, 8'd0, r_rid_reg[7:0], r_rid_reg[15:8]};
wire [2*DATA_W-1:0] base = opening ? {{(2*DATA_W-64){1'b0}}, frame_hdr} : {{DATA_W{1'b0}}, acc_reg};
wire [FW:0] base_n = opening ? 8 : {1'b0, f_reg};
wire [2*DATA_W-1:0] comb = base | ({{DATA_W{1'b0}}, chunk} << {base_n, 3'b000});
// the bytes held with the chunk, both cases worked out before the choice
wire [FW:0] t_n_open = 8 + {1'b0, ch_n};
wire [FW:0] t_n_acc = {1'b0, f_reg} + {1'b0, ch_n};
wire [FW:0] t_n = opening ? t_n_open : t_n_acc;
wire t_full = opening ? t_n_open > bytes32[FW:0] : t_n_acc > bytes32[FW:0];
// the comparisons with a response's length are 8 bits wide: the wide operands' high bits were
// tested when they were stored
wire [7:0] r_len8 = r_len_reg[7:0];
wire overflow = room_small_reg && r_len8 > room_reg[7:0];
wire too_long = ch_first && open_reg && overflow;
// the budget test (S0 + len (+ 8) > B) for both frame-header cases at once, the choice last
wire over0 = left_reg[25] || (left_small_reg && r_len8 > left_reg[7:0]);
wire over8 = left8_neg_reg || (left8_small_reg && r_len8 > left8_lo_reg);
// what is left after this response: from B at the request datagram's first response
wire [25:0] left_base = sent_reg ? left_reg : {2'b00, r_bud_reg};
wire [25:0] left_next = left_base - {10'd0, r_len_reg} - (opening ? 26'd8 : 26'd0);
wire [25:0] left8_next = left_next - 26'd8;
wire [15:0] room_next = (opening ? MAX_DGRAM16 - 16'd8 : room_reg) - r_len_reg;
wire over = ch_first && sent_reg && !cut_reg && !r_unl_reg && ((!open_reg || overflow) ? over8 : over0);

// the budget reply in place of the response in R (frontend.md §10)
wire [8*RB-1:0] bud_bin = ({{(8*RB-8*TB){1'b0}}, lanes("Use TCP", 7)} << (8*MC_HDR_BYTES)) |
    {{(8*RB-128){1'b0}}, r_rec_reg[127:96], 8'h07, 24'd0, 8'h85, 40'd0, r_rec_reg[15:8], MC_MAGIC_RSP};
wire [8*RB-1:0] bud_txt = {{(8*RB-8*TB){1'b0}},
    lanes("SERVER_ERROR reply exceeds UDP budget; use TCP\015\012", 48)};
assign bud_rec = r_bin_reg ? bud_bin : bud_txt;
assign bud_len = r_bin_reg ? BUD_BIN_LEN : BUD_TXT_LEN;

reg emit;
reg [DATA_W-1:0] emit_data;
reg [FW:0] emit_n;
reg emit_last;
reg take_chunk;
reg close_dg;
reg cut_now;
always @* begin
    emit = 1'b0;
    emit_data = acc_reg;
    emit_n = {1'b0, f_reg};
    emit_last = 1'b1;
    take_chunk = 1'b0;
    close_dg = 1'b0;
    cut_now = 1'b0;
    if (o_free) begin
        if (pend_close_reg) begin
            emit = 1'b1;
            close_dg = 1'b1;
        end else if (r_valid_reg && !k_send) begin
            // a suppressed or withheld response; the last of the request datagram closes
            emit = open_reg && r_close_reg;
            close_dg = open_reg && r_close_reg;
            take_chunk = 1'b1;
        end else if (r_valid_reg && over) begin
            cut_now = 1'b1;
        end else if (r_valid_reg && too_long) begin
            emit = 1'b1;
            close_dg = 1'b1;
        end else if (r_valid_reg) begin
            take_chunk = 1'b1;
            emit_data = comb[DATA_W-1:0];
            if (t_full) begin
                emit = 1'b1;
                emit_n = bytes32[FW:0];
                emit_last = 1'b0;
            end else if (ch_last && r_close_reg) begin
                emit = 1'b1;
                emit_n = t_n;
                close_dg = 1'b1;
            end
        end
    end
end

assign r_done = take_chunk && (!k_send || ch_last);
assign cut = cut_now;

integer i2;
always @(posedge clk) begin
    stat_response_reg <= r_done && k_send;
    stat_error_reg <= r_done && k_send && r_err_reg;
    stat_datagram_reg <= emit && emit_last;
    stat_budget_reg <= cut_now;

    if (m_axis_tready) begin
        o_valid_reg <= 1'b0;
    end
    if (emit) begin
        o_valid_reg <= 1'b1;
        o_data_reg <= emit_data;
        for (i2 = 0; i2 < BYTES; i2 = i2 + 1) begin
            o_keep_reg[i2] <= i2 < emit_n;
        end
        o_last_reg <= emit_last;
        o_meta_reg <= {opening && take_chunk ? r_meta_reg : k_meta_reg, 16'd0};
    end

    if (take_chunk && k_send) begin
        if (ch_first) begin
            left_reg <= left_next;
            left8_neg_reg <= left8_next[25];
            left8_lo_reg <= left8_next[7:0];
            left_small_reg <= left_next[25:8] == 18'd0;
            left8_small_reg <= left8_next[25:8] == 18'd0;
            sent_reg <= 1'b1;
        end
        r_ptr_reg <= ch_last ? {CHW{1'b0}} : r_ptr_reg + 1'b1;
        if (ch_first) begin
            room_reg <= room_next;
            room_small_reg <= room_next[15:8] == 8'd0;
        end
        if (opening) begin
            open_reg <= 1'b1;
            k_meta_reg <= r_meta_reg;
            k_rid_reg <= r_rid_reg;
        end
        if (t_full) begin
            acc_reg <= comb[2*DATA_W-1:DATA_W];
            f_reg <= t_n[FW-1:0] - bytes32[FW-1:0];
            if (ch_last && r_close_reg) begin
                pend_close_reg <= 1'b1;
            end
        end else begin
            acc_reg <= comb[DATA_W-1:0];
            f_reg <= t_n[FW-1:0];
        end
    end
    if (close_dg) begin
        open_reg <= 1'b0;
        f_reg <= {FW{1'b0}};
        acc_reg <= {DATA_W{1'b0}};
        pend_close_reg <= 1'b0;
    end
    if (r_load) begin
        r_ptr_reg <= {CHW{1'b0}};
    end
    if (r_load) begin
        r_rest_reg <= p_len_reg;
        r_clast_reg <= last_load;
        r_chn_reg <= chn_load;
    end else if (cut) begin
        r_rest_reg <= bud_len;
        r_clast_reg <= last_bud;
        r_chn_reg <= chn_bud;
    end else if (take_chunk && k_send && !ch_last) begin
        r_rest_reg <= rest_adv;
        r_clast_reg <= last_adv;
        r_chn_reg <= chn_adv;
    end
    if (cut_now) begin
        cut_reg <= 1'b1;
    end
    if (r_done && r_close_reg) begin
        // the request datagram's last descriptor: its budget state is done
        sent_reg <= 1'b0;
        cut_reg <= 1'b0;
    end

    if (rst) begin
        sent_reg <= 1'b0;
        cut_reg <= 1'b0;
        stat_budget_reg <= 1'b0;
        r_ptr_reg <= {CHW{1'b0}};
        acc_reg <= {DATA_W{1'b0}};
        f_reg <= {FW{1'b0}};
        open_reg <= 1'b0;
        room_reg <= MAX_DGRAM16;
        room_small_reg <= 1'b0;
        pend_close_reg <= 1'b0;
        o_valid_reg <= 1'b0;
        stat_response_reg <= 1'b0;
        stat_error_reg <= 1'b0;
        stat_datagram_reg <= 1'b0;
    end
end

assign m_axis_tdata = o_data_reg;
assign m_axis_tkeep = o_keep_reg;
assign m_axis_tvalid = o_valid_reg;
assign m_axis_tlast = o_last_reg;
assign m_axis_meta = o_meta_reg;
assign stat_response = stat_response_reg;
assign stat_error = stat_error_reg;
assign stat_datagram = stat_datagram_reg;
assign stat_budget = stat_budget_reg;

wire unused = &{1'b0, k_rid_reg, bytes32, vb32};

endmodule

`resetall
