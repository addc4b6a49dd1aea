/*

pynq-kv: memcached text-protocol subset, byte serial

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * The text subset of docs/frontend.md §6 (get / set / delete / version), one
 * byte per cycle from kv_mc_rx, into the same engine requests and response
 * descriptors kv_mc_dec makes for binary requests.  There is no throughput
 * target: at most one byte is taken per cycle, and the machine stops taking
 * bytes while it has a line to act on.
 *
 * Lines: a command line runs to the first "\n"; one "\r" right before it is
 * removed (a byte is looked at one cycle late, so a "\r" is known to be the
 * one before "\n" or a token byte).  Tokens are runs of bytes other than
 * 0x20.  While a line streams in, the tokenizer counts tokens (saturating at
 * 7), recognises the command (token 1), keeps the key (token 2, the first
 * MAX_KEY bytes and the length), checks tokens 3-6 for the number formats of
 * `set` and the `0` / `noreply` words of `delete`, and notes whether any
 * token after the first is longer than MAX_KEY; it also writes the line
 * (after "\r" removal) into a line buffer of LINE_BYTES bytes, from which a
 * `get` takes its keys once the whole line has been checked.
 *
 * Per line (the rules and replies of frontend.md §6):
 *   get <key>+          any key > MAX_KEY: MC_T_BADFMT; else one GET per key
 *                       (response kind MC_RK_TVALUE) and MC_RK_TEND
 *   set k f e b [nr]    f, b: 1-10 digits, e: 1-10 digits after an optional
 *                       "-", else MC_T_BADFMT (the data block is read as the
 *                       next line); then b + 2 bytes of data block (the first
 *                       MAX_VALUE kept), then key > MAX_KEY: MC_T_BADFMT;
 *                       f or e != 0: MC_T_FLAGS; b > MAX_VALUE: MC_T_TOOLARGE;
 *                       block not ending in "\r\n": MC_T_BADCHUNK; else SET
 *                       (MC_RK_TSET, flag = noreply)
 *   delete k [0] [nr]   usage as §6 else MC_T_DELUSAGE; key > MAX_KEY:
 *                       MC_T_BADFMT; else DEL (MC_RK_TDEL, flag = noreply)
 *   version             MC_RK_TMSG, code MC_T_VERSION
 *   anything else       MC_T_ERROR
 * A line without "\n" before the end of the datagram, or a set whose data
 * block is cut by it, ends the datagram (stat_truncated).  After the last
 * byte of a datagram one MC_RK_NONE item with o_d_last closes it.
 * stat_req_text pulses for every command line taken (a set whose block is
 * cut is not taken, as in the reference model).
 *
 * Deviation by design (cannot happen below a 2 KiB MTU with the default
 * LINE_BYTES): a `get` line longer than LINE_BYTES cannot be re-read; the
 * rest of the datagram is dropped and counted as truncated.
 *
 * text_idle is high when no datagram is in progress and no item is waiting
 * on o_*: kv_mc_rx then lets binary items of later datagrams through.
 */
module kv_mc_text #
(
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: multiple of 32, 32 to 512
    parameter VALUE_W = 32,
    // Line buffer in bytes (longest `get` line): a power of two, 64 to 65536
    parameter LINE_BYTES = 2048
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * Text bytes of a datagram (kv_mc_rx m_text_*)
     */
    input  wire [7:0]                s_data,
    input  wire                      s_last,
    input  wire                      s_valid,
    output wire                      s_ready,
    output wire                      text_idle,

    /*
     * Decoded: engine operation and response descriptor (as kv_mc_dec)
     */
    output wire                      o_valid,
    input  wire                      o_ready,
    output wire                      o_eng,
    output wire [4:0]                o_eop,
    output wire [KEY_W-1:0]          o_ekey,
    output wire [VALUE_W-1:0]        o_evalue,
    output wire                      o_d_last,
    output wire [3:0]                o_d_rk,
    output wire                      o_d_flag,
    output wire [3:0]                o_d_code,
    output wire [7:0]                o_d_kl,
    output wire [KEY_W-9:0]          o_d_key,

    /*
     * Statistics (one-cycle pulses)
     */
    output wire                      stat_req_text,
    output wire                      stat_truncated
);

`include "kv_regs.vh"
`include "kv_mc_defs.vh"

localparam KB = KEY_W / 8;
localparam VB = VALUE_W / 8;
localparam MAX_KEY = KB - 1;
localparam MAX_VALUE = VB - 1;
localparam LAW = $clog2(LINE_BYTES);
wire [31:0] max_value32 = MAX_VALUE;

localparam [2:0]
    S_LINE = 3'd0,      // taking the bytes of a command line
    S_EOL = 3'd1,       // "\n" seen: close the last token
    S_EXEC = 3'd2,      // act on the line
    S_GETSCAN = 3'd3,   // get: keys from the line buffer
    S_DATA = 3'd4,      // set: taking the data block
    S_SETDONE = 3'd5,   // set: block taken, act
    S_FLUSH = 3'd6,     // datagram over: the closing item
    S_DISCARD = 3'd7;   // drop the rest of the datagram, then S_FLUSH

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
    if (LINE_BYTES < 64 || LINE_BYTES > 65536 || (1 << LAW) != LINE_BYTES) begin
        $error("Error: LINE_BYTES must be a power of two from 64 to 65536 (instance %m)");
        $finish;
    end
end

reg [2:0] state_reg;
reg busy_reg;            // a datagram is in progress
reg dg_end_reg;          // its last byte has been taken

// tokenizer
reg pend_valid_reg;      // a byte waiting to see whether "\n" follows
reg [7:0] pend_reg;
reg in_tok_reg;
reg [2:0] ntok_reg;      // tokens of the line, saturating at 7
reg [7:0] cur_len_reg;   // length of the current token, saturating at 255
reg [55:0] cur_str_reg; // its first 7 bytes, lane order
reg cur_dig_reg;         // every byte a digit
reg cur_rest_dig_reg;    // every byte after the first a digit
reg cur_nz_reg;          // a digit 1-9 seen
reg [33:0] cur_val_reg; // decimal value
reg c_get_reg;
reg c_set_reg;
reg c_delete_reg;
reg c_version_reg;
reg [7:0] klen_reg;      // token 2 length (saturating)
reg [8*MAX_KEY-1:0] key_reg;
reg any_long_reg;        // a token after the first is longer than MAX_KEY
reg t3_u_reg, t3_nz_reg, t3_is0_reg, t3_isnr_reg;
reg t4_s_reg, t4_nz_reg, t4_isnr_reg;
reg t5_u_reg;
reg [33:0] t5_val_reg;
reg t5_big_reg;          // t5_val_reg > MAX_VALUE, compared when the token ends (off the act path)
reg t6_isnr_reg;

// line buffer
reg [7:0] lb_mem [0:LINE_BYTES-1];
reg [LAW:0] lpos_reg;
reg lb_over_reg;
reg [7:0] lb_rd_reg;
reg [LAW:0] scan_pos_reg;
reg scan_in_tok_reg;
reg scan_cmd_reg;        // the scan is still in the command token (or before it)

// set data block
reg [34:0] remain_reg;
reg [7:0] didx_reg;      // data bytes kept so far (saturating)
reg [15:0] last2_reg;
reg [8*MAX_VALUE-1:0] val_reg;

// output register
reg o_valid_reg;
reg o_eng_reg;
reg [4:0] o_eop_reg;
reg [KEY_W-1:0] o_ekey_reg;
reg [VALUE_W-1:0] o_evalue_reg;
reg o_d_last_reg;
reg [3:0] o_d_rk_reg;
reg o_d_flag_reg;
reg [3:0] o_d_code_reg;
reg [7:0] o_d_kl_reg;
reg [8*MAX_KEY-1:0] o_d_key_reg;
reg stat_req_text_reg;
reg stat_truncated_reg;

assign o_valid = o_valid_reg;
assign o_eng = o_eng_reg;
assign o_eop = o_eop_reg;
assign o_ekey = o_ekey_reg;
assign o_evalue = o_evalue_reg;
assign o_d_last = o_d_last_reg;
assign o_d_rk = o_d_rk_reg;
assign o_d_flag = o_d_flag_reg;
assign o_d_code = o_d_code_reg;
assign o_d_kl = o_d_kl_reg;
assign o_d_key = o_d_key_reg;
assign stat_req_text = stat_req_text_reg;
assign stat_truncated = stat_truncated_reg;
assign text_idle = !busy_reg && !o_valid_reg;

wire out_free = !o_valid_reg || o_ready;

assign s_ready = state_reg == S_LINE || state_reg == S_DATA || state_reg == S_DISCARD;
wire take = s_valid && s_ready;

/*
 * tokenizer input: the pending byte is processed when the next byte arrives,
 * unless it is the "\r" right before "\n"
 */
wire line_byte = take && state_reg == S_LINE;
wire nl = s_data == 8'h0a;
wire proc = line_byte && pend_valid_reg && !(nl && pend_reg == 8'h0d);
wire [7:0] pc = pend_reg;
wire pc_sp = pc == 8'h20;
wire pc_dig = pc >= 8'h30 && pc <= 8'h39;
wire pc_nz = pc >= 8'h31 && pc <= 8'h39;
wire tok_start = proc && !pc_sp && !in_tok_reg;
wire tok_more = proc && !pc_sp && in_tok_reg;
wire tok_end = (proc && pc_sp && in_tok_reg) || (state_reg == S_EOL && in_tok_reg);
wire [2:0] ntok_inc = (ntok_reg == 3'd7) ? 3'd7 : ntok_reg + 3'd1;

// token classification at its end
wire u_ok = cur_dig_reg && cur_len_reg >= 8'd1 && cur_len_reg <= 8'd10;
wire s_ok = u_ok || (cur_str_reg[7:0] == 8'h2d && cur_rest_dig_reg &&
                     cur_len_reg >= 8'd2 && cur_len_reg <= 8'd11);
wire is_word_0 = cur_len_reg == 8'd1 && cur_str_reg[7:0] == "0";
// "noreply" in lane order: byte 0 = 'n'
wire is_noreply = cur_len_reg == 8'd7 && cur_str_reg[55:0] == 56'h796C7065726F6E;
wire is_get = cur_len_reg == 8'd3 && cur_str_reg[23:0] == 24'h746567;
wire is_set = cur_len_reg == 8'd3 && cur_str_reg[23:0] == 24'h746573;
wire is_delete = cur_len_reg == 8'd6 && cur_str_reg[47:0] == 48'h6574656C6564;
wire is_version = cur_len_reg == 8'd7 && cur_str_reg[55:0] == 56'h6E6F6973726576;

/*
 * line decisions
 */
wire klen_long = {24'd0, klen_reg} > MAX_KEY;
wire n_set_ok = ntok_reg == 3'd5 || ntok_reg == 3'd6;
wire n_del_ok = ntok_reg >= 3'd2 && ntok_reg <= 3'd4;
wire del_usage_ok = ntok_reg == 3'd2 || (ntok_reg == 3'd3 && (t3_is0_reg || t3_isnr_reg)) ||
                    (ntok_reg == 3'd4 && t3_is0_reg && t4_isnr_reg);
wire del_noreply = (ntok_reg == 3'd3 && t3_isnr_reg) || ntok_reg == 3'd4;
wire set_noreply = ntok_reg == 3'd6 && t6_isnr_reg;

// engine key/value of the collected key/value (big-endian, length first)
reg [KEY_W-1:0] key_enc;
reg [VALUE_W-1:0] val_enc;
integer j;
always @* begin
    key_enc[KEY_W-1 -: 8] = klen_reg;
    for (j = 0; j < MAX_KEY; j = j + 1) begin
        key_enc[KEY_W-9-8*j -: 8] = (j < klen_reg) ? key_reg[8*j +: 8] : 8'd0;
    end
    val_enc[VALUE_W-1 -: 8] = t5_val_reg[7:0];
    for (j = 0; j < MAX_VALUE; j = j + 1) begin
        val_enc[VALUE_W-9-8*j -: 8] = (j < {24'd0, t5_val_reg[7:0]}) ? val_reg[8*j +: 8] : 8'd0;
    end
end

// get scan: the byte at scan_pos is in lb_rd_reg
wire scan_end = scan_pos_reg == lpos_reg;
wire scan_sp = lb_rd_reg == 8'h20;

/*
 * the actions of this cycle
 */
reg emit;
reg e_eng;
reg [4:0] e_eop;
reg [3:0] e_rk;
reg [3:0] e_code;
reg e_flag;
reg e_last;
reg e_key_scan;         // the key of the item is the scan's (klen/key_reg hold it)
reg [2:0] state_next;
reg line_reset;
reg req_text;
reg truncated;
reg scan_adv;

always @* begin
    emit = 1'b0;
    e_eng = 1'b0;
    e_eop = KV_OP_GET;
    e_rk = MC_RK_NONE;
    e_code = MC_T_ERROR;
    e_flag = 1'b0;
    e_last = 1'b0;
    e_key_scan = 1'b0;
    state_next = state_reg;
    line_reset = 1'b0;
    req_text = 1'b0;
    truncated = 1'b0;
    scan_adv = 1'b0;
    case (state_reg)
        S_LINE: begin
            if (take) begin
                if (nl) begin
                    state_next = S_EOL;
                end else if (s_last) begin
                    // no "\n" before the end of the datagram
                    truncated = 1'b1;
                    state_next = S_FLUSH;
                end
            end
        end
        S_EOL: begin
            state_next = S_EXEC;
        end
        S_EXEC: begin
            if (c_get_reg && ntok_reg >= 3'd2 && !any_long_reg && lb_over_reg) begin
                // cannot re-read the line (longer than LINE_BYTES)
                truncated = 1'b1;
                state_next = dg_end_reg ? S_FLUSH : S_DISCARD;
            end else if (c_get_reg && ntok_reg >= 3'd2 && !any_long_reg) begin
                req_text = 1'b1;
                state_next = S_GETSCAN;
            end else if (c_set_reg && n_set_ok && t3_u_reg && t4_s_reg && t5_u_reg) begin
                if (dg_end_reg) begin
                    truncated = 1'b1;
                    state_next = S_FLUSH;
                end else begin
                    state_next = S_DATA;
                end
            end else if (out_free) begin
                emit = 1'b1;
                req_text = 1'b1;
                e_rk = MC_RK_TMSG;
                if (c_get_reg && ntok_reg >= 3'd2) begin
                    e_code = MC_T_BADFMT;
                end else if (c_set_reg && n_set_ok) begin
                    e_code = MC_T_BADFMT;
                end else if (c_delete_reg && n_del_ok) begin
                    if (!del_usage_ok) begin
                        e_code = MC_T_DELUSAGE;
                    end else if (klen_long) begin
                        e_code = MC_T_BADFMT;
                    end else begin
                        e_rk = MC_RK_TDEL;
                        e_eng = 1'b1;
                        e_eop = KV_OP_DEL;
                        e_flag = del_noreply;
                    end
                end else if (c_version_reg && ntok_reg == 3'd1) begin
                    e_code = MC_T_VERSION;
                end else begin
                    e_code = MC_T_ERROR;
                end
                line_reset = 1'b1;
                state_next = dg_end_reg ? S_FLUSH : S_LINE;
            end
        end
        S_GETSCAN: begin
            if (scan_end) begin
                if (out_free) begin
                    emit = 1'b1;
                    if (scan_in_tok_reg && !scan_cmd_reg) begin
                        e_rk = MC_RK_TVALUE;
                        e_eng = 1'b1;
                        e_eop = KV_OP_GET;
                        e_key_scan = 1'b1;
                    end else begin
                        e_rk = MC_RK_TEND;
                        line_reset = 1'b1;
                        state_next = dg_end_reg ? S_FLUSH : S_LINE;
                    end
                end
            end else if (scan_sp && scan_in_tok_reg && !scan_cmd_reg) begin
                if (out_free) begin
                    emit = 1'b1;
                    e_rk = MC_RK_TVALUE;
                    e_eng = 1'b1;
                    e_eop = KV_OP_GET;
                    e_key_scan = 1'b1;
                    scan_adv = 1'b1;
                end
            end else begin
                scan_adv = 1'b1;
            end
        end
        S_DATA: begin
            if (take) begin
                if (remain_reg == 35'd1) begin
                    state_next = S_SETDONE;
                end else if (s_last) begin
                    truncated = 1'b1;
                    state_next = S_FLUSH;
                end
            end
        end
        S_SETDONE: begin
            if (out_free) begin
                emit = 1'b1;
                req_text = 1'b1;
                e_rk = MC_RK_TMSG;
                if (klen_long) begin
                    e_code = MC_T_BADFMT;
                end else if (t3_nz_reg || t4_nz_reg) begin
                    e_code = MC_T_FLAGS;
                end else if (t5_big_reg) begin
                    e_code = MC_T_TOOLARGE;
                end else if (last2_reg != 16'h0d0a) begin
                    e_code = MC_T_BADCHUNK;
                end else begin
                    e_rk = MC_RK_TSET;
                    e_eng = 1'b1;
                    e_eop = KV_OP_SET;
                    e_flag = set_noreply;
                end
                line_reset = 1'b1;
                state_next = dg_end_reg ? S_FLUSH : S_LINE;
            end
        end
        S_FLUSH: begin
            if (out_free) begin
                emit = 1'b1;
                e_last = 1'b1;
                line_reset = 1'b1;
                state_next = S_LINE;
            end
        end
        default: begin // S_DISCARD
            if (take && s_last) begin
                state_next = S_FLUSH;
            end
        end
    endcase
end

/*
 * line buffer: written while the line streams in, read (synchronously, the
 * byte at the next scan position) by the get scan
 */
wire [LAW:0] scan_next = (state_reg != S_GETSCAN) ? {LAW+1{1'b0}} :
                         (scan_adv ? scan_pos_reg + 1'b1 : scan_pos_reg);

always @(posedge clk) begin
    if (proc && !lpos_reg[LAW]) begin
        lb_mem[lpos_reg[LAW-1:0]] <= pc;
    end
    lb_rd_reg <= lb_mem[scan_next[LAW-1:0]];
end

always @(posedge clk) begin
    state_reg <= state_next;
    stat_req_text_reg <= req_text;
    stat_truncated_reg <= truncated;

    if (take) begin
        busy_reg <= 1'b1;
        if (s_last) begin
            dg_end_reg <= 1'b1;
        end
    end

    // tokenizer
    if (line_byte) begin
        pend_valid_reg <= !nl;
        pend_reg <= s_data;
    end
    if (proc) begin
        if (lpos_reg[LAW]) begin
            lb_over_reg <= 1'b1;
        end else begin
            lpos_reg <= lpos_reg + 1'b1;
        end
    end
    if (tok_start) begin
        in_tok_reg <= 1'b1;
        ntok_reg <= ntok_inc;
        cur_len_reg <= 8'd1;
        cur_str_reg <= {48'd0, pc};
        cur_dig_reg <= pc_dig;
        cur_rest_dig_reg <= 1'b1;
        cur_nz_reg <= pc_nz;
        cur_val_reg <= {30'd0, pc[3:0]};
        if (ntok_inc == 3'd2) begin
            key_reg <= {{(8*MAX_KEY-8){1'b0}}, pc};
        end
    end
    if (tok_more) begin
        cur_len_reg <= (cur_len_reg == 8'd255) ? 8'd255 : cur_len_reg + 8'd1;
        if (cur_len_reg < 8'd7) begin
            cur_str_reg[{cur_len_reg[2:0], 3'b000} +: 8] <= pc;
        end
        cur_dig_reg <= cur_dig_reg && pc_dig;
        cur_rest_dig_reg <= cur_rest_dig_reg && pc_dig;
        cur_nz_reg <= cur_nz_reg || pc_nz;
        cur_val_reg <= cur_val_reg * 34'd10 + {30'd0, pc[3:0]};
        if (ntok_reg == 3'd2 && {24'd0, cur_len_reg} < MAX_KEY) begin
            key_reg[8*cur_len_reg +: 8] <= pc;
        end
    end
    if (tok_end) begin
        in_tok_reg <= 1'b0;
        if (ntok_reg >= 3'd2 && {24'd0, cur_len_reg} > MAX_KEY) begin
            any_long_reg <= 1'b1;
        end
        case (ntok_reg)
            3'd1: begin
                c_get_reg <= is_get;
                c_set_reg <= is_set;
                c_delete_reg <= is_delete;
                c_version_reg <= is_version;
            end
            3'd2: klen_reg <= cur_len_reg;
            3'd3: begin
                t3_u_reg <= u_ok;
                t3_nz_reg <= cur_nz_reg;
                t3_is0_reg <= is_word_0;
                t3_isnr_reg <= is_noreply;
            end
            3'd4: begin
                t4_s_reg <= s_ok;
                t4_nz_reg <= cur_nz_reg;
                t4_isnr_reg <= is_noreply;
            end
            3'd5: begin
                t5_u_reg <= u_ok;
                t5_val_reg <= cur_val_reg;
                t5_big_reg <= cur_val_reg > {2'b00, max_value32};
            end
            3'd6: t6_isnr_reg <= is_noreply;
            default: ;
        endcase
    end

    // set: data block
    if (state_reg == S_EXEC && state_next == S_DATA) begin
        remain_reg <= {1'b0, t5_val_reg} + 35'd2;
        didx_reg <= 8'd0;
        last2_reg <= 16'd0;
    end
    if (take && state_reg == S_DATA) begin
        remain_reg <= remain_reg - 35'd1;
        last2_reg <= {last2_reg[7:0], s_data};
        if ({26'd0, didx_reg} < t5_val_reg && {24'd0, didx_reg} < MAX_VALUE) begin
            val_reg[8*didx_reg +: 8] <= s_data;
            didx_reg <= didx_reg + 8'd1;
        end
    end

    // get: scan of the line buffer (the command token is skipped)
    if (state_reg == S_EXEC && state_next == S_GETSCAN) begin
        scan_in_tok_reg <= 1'b0;
        scan_cmd_reg <= 1'b1;
        klen_reg <= 8'd0;
    end
    if (state_reg == S_GETSCAN) begin
        scan_pos_reg <= scan_next;
        if (e_key_scan) begin
            scan_in_tok_reg <= 1'b0;
            klen_reg <= 8'd0;
        end else if (scan_adv) begin
            if (scan_sp) begin
                if (scan_in_tok_reg) begin
                    scan_cmd_reg <= 1'b0;
                end
                scan_in_tok_reg <= 1'b0;
            end else begin
                scan_in_tok_reg <= 1'b1;
                if (!scan_cmd_reg) begin
                    if ({24'd0, klen_reg} < MAX_KEY) begin
                        key_reg[8*klen_reg +: 8] <= lb_rd_reg;
                    end
                    klen_reg <= klen_reg + 8'd1;
                end
            end
        end
    end else begin
        scan_pos_reg <= {LAW+1{1'b0}};
    end

    // output register
    if (o_ready) begin
        o_valid_reg <= 1'b0;
    end
    if (emit) begin
        o_valid_reg <= 1'b1;
        o_eng_reg <= e_eng;
        o_eop_reg <= e_eop;
        o_ekey_reg <= key_enc;
        o_evalue_reg <= val_enc;
        o_d_last_reg <= e_last;
        o_d_rk_reg <= e_rk;
        o_d_flag_reg <= e_flag;
        o_d_code_reg <= e_code;
        o_d_kl_reg <= klen_reg;
        o_d_key_reg <= key_reg;
        if (e_last) begin
            busy_reg <= 1'b0;
            dg_end_reg <= 1'b0;
        end
    end

    // a new line (or a reset, which may come in the middle of one): clear the tokenizer
    if (line_reset || rst) begin
        pend_valid_reg <= 1'b0;
        in_tok_reg <= 1'b0;
        ntok_reg <= 3'd0;
        c_get_reg <= 1'b0;
        c_set_reg <= 1'b0;
        c_delete_reg <= 1'b0;
        c_version_reg <= 1'b0;
        klen_reg <= 8'd0;
        key_reg <= {8*MAX_KEY{1'b0}};
        any_long_reg <= 1'b0;
        t3_u_reg <= 1'b0;
        t3_nz_reg <= 1'b0;
        t3_is0_reg <= 1'b0;
        t3_isnr_reg <= 1'b0;
        t4_s_reg <= 1'b0;
        t4_nz_reg <= 1'b0;
        t4_isnr_reg <= 1'b0;
        t5_u_reg <= 1'b0;
        t5_val_reg <= 34'd0;
        t5_big_reg <= 1'b0;
        t6_isnr_reg <= 1'b0;
        lpos_reg <= {LAW+1{1'b0}};
        lb_over_reg <= 1'b0;
    end

    if (rst) begin
        state_reg <= S_LINE;
        busy_reg <= 1'b0;
        dg_end_reg <= 1'b0;
        pend_valid_reg <= 1'b0;
        in_tok_reg <= 1'b0;
        ntok_reg <= 3'd0;
        lpos_reg <= {LAW+1{1'b0}};
        lb_over_reg <= 1'b0;
        o_valid_reg <= 1'b0;
        stat_req_text_reg <= 1'b0;
        stat_truncated_reg <= 1'b0;
    end
end

endmodule

`resetall
