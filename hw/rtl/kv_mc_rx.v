/*

pynq-kv: memcached front-end request walker

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Splits the UDP payloads of received datagrams into memcached requests.
 *
 * Input: UDP payloads as AXI4-Stream (s_axis_*), bytes packed from lane 0
 * (byte i of a beat is tdata[8i +: 8], tkeep contiguous from lane 0), every
 * beat but the last full, one datagram per packet (tlast), and the
 * datagram's metadata on s_meta, valid with the first beat.
 *
 * Each datagram starts with the 8-byte memcached UDP frame header (request
 * id, sequence number, datagram count, reserved).  It is taken straight from
 * the first beat as it arrives: {s_meta, request id} goes to m_meta_* (one
 * word per datagram, in datagram order) and the stat_* pulses count it; the
 * beat then waits in a two-entry queue until the datagram before it is done,
 * while the other beats pass a register slice (input side, below).  A
 * datagram shorter than 8 bytes, or whose
 * header is not a single-datagram request (datagram count != 1), gives one
 * item MC_K_DROP_SHORT / MC_K_DROP_HDR and is discarded (frontend.md §3; the
 * stat_* pulses count rx_datagrams, drop_short, drop_multi_datagram, served).
 *
 * The rest of the datagram is appended to a byte window (W = REQ_BYTES +
 * BYTES bytes, realigned so the current request starts at byte 0).  The first
 * byte selects the protocol of the whole datagram: 0x80 (binary request
 * magic) is binary, anything else is text.
 *
 * Binary: one item per request on m_item_*, at most one per clock cycle.  A
 * request is its 24-byte header plus `total body length` bytes.
 *   MC_K_BIN   a request of at most REQ_BYTES bytes, whole: m_item_data holds
 *              it from byte 0 (the bytes after it are whatever follows in the
 *              datagram: the decoder masks fields by their lengths)
 *   MC_K_BIG   a longer request: its body is skipped (never stored), the item
 *              carries its first 32 bytes only (header and 8 bytes of extras)
 *   MC_K_TRUNC the datagram ended inside a request: m_item_cnt bytes of it were
 *              present (m_item_data holds them; a MC_K_BIG-sized request reports
 *              24 and its header); the item is the datagram's last (m_item_cnt
 *              is read for this kind only)
 *   MC_K_MAGIC a header whose magic is not 0x80: the item is the datagram's
 *              last and the rest of the datagram is discarded
 *   MC_K_EMPTY a datagram with nothing after the frame header
 * A new request is taken every cycle when the window holds it whole; the
 * window is refilled by a full beat whenever it has room, so requests of at
 * most BYTES bytes flow at one per cycle.  Every other outcome (bad magic, a
 * longer request, a truncation) is decided a cycle later, from the tests of
 * a window that has not changed since (the decision path then holds only the
 * tests a whole request needs).  m_item_first / m_item_last mark
 * the first and the last item of a datagram (exactly one of each, possibly
 * the same item).
 *
 * Text: the bytes go one per cycle to m_text_* (m_text_first on a
 * datagram's first byte, m_text_last on its last).  They are offered only
 * when no binary item is waiting on m_item_*, and binary items of later
 * datagrams wait for text_idle, so the text handler's output and the items
 * keep datagram order.
 *
 * A datagram's bytes never share the window with the next datagram's; the
 * next datagram's first beat is taken from the queue in the cycle the
 * current one is finished, so one-beat datagrams flow at one per cycle.
 *
 * Depth (docs/rtl.md, Timing): the decision reads only register bits, mask
 * bits and one carry chain per test (no adder in front of a test, no
 * comparison folded into a sum); every window and count the decision can
 * choose is worked out beside it; its outcome reaches nothing but this
 * module's registers (the input side's handshake and the metadata word
 * depend on registers only, and text_idle is registered here).
 */
module kv_mc_rx #
(
    // Payload stream width in bits: 64, 128, 256 or 512
    parameter DATA_W = 512,
    // Longest binary request handled whole, in bytes: >= 32 (the front-end
    // uses 24 + 8 + KEY_BYTES-1 + VALUE_BYTES-1, a SET of the longest key and value)
    parameter REQ_BYTES = 98,
    // Width of the per-datagram metadata carried from s_meta to m_meta: >= 1
    parameter META_W = 129
)
(
    input  wire                     clk,
    input  wire                     rst,

    /*
     * UDP payloads
     */
    input  wire [DATA_W-1:0]        s_axis_tdata,
    input  wire [DATA_W/8-1:0]      s_axis_tkeep,
    input  wire                     s_axis_tvalid,
    output wire                     s_axis_tready,
    input  wire                     s_axis_tlast,
    input  wire [META_W-1:0]        s_meta,

    /*
     * Per-datagram metadata and request id, in datagram order
     */
    output wire [META_W+15:0]       m_meta_data,
    output wire                     m_meta_valid,
    input  wire                     m_meta_ready,

    /*
     * Binary requests (and per-datagram events)
     */
    output wire [2:0]               m_item_kind,
    output wire                     m_item_first,
    output wire                     m_item_last,
    output wire [8*REQ_BYTES-1:0]   m_item_data,
    output wire [15:0]              m_item_cnt,
    output wire                     m_item_valid,
    input  wire                     m_item_ready,

    /*
     * Text datagrams, one byte per beat
     */
    output wire [7:0]               m_text_data,
    output wire                     m_text_first,
    output wire                     m_text_last,
    output wire                     m_text_valid,
    input  wire                     m_text_ready,
    input  wire                     text_idle,

    /*
     * Statistics (one-cycle pulses): datagram taken, and its outcome
     */
    output wire                     stat_dgram,
    output wire                     stat_short,
    output wire                     stat_multi,
    output wire                     stat_served
);

`include "kv_mc_defs.vh"

localparam BYTES = DATA_W / 8;
// window bytes: the longest request and a beat, and at least 3 beats less one
// (see the input side)
localparam W = (REQ_BYTES + BYTES > 3 * BYTES - 1) ? REQ_BYTES + BYTES : 3 * BYTES - 1;
localparam CW = $clog2(W + 1);           // window byte count width
localparam BW = $clog2(BYTES + 1);       // beat byte count width
localparam [31:0] REQ_K = REQ_BYTES - 24;     // the longest body that fits (< W)

// walker modes, one-hot (each test of the mode is one register bit): the bit of each
localparam
    MB_NEW = 0,         // datagram started, protocol not known yet (window empty)
    MB_BIN = 1,         // binary requests
    MB_TEXT = 2,        // text: one byte a cycle (skip_reg holds 1)
    MB_SKIP = 3,        // skipping the body of a MC_K_BIG request
    MB_DISCARD = 4,     // discarding the rest of the datagram
    MB_DROP = 5;        // emit the MC_K_DROP_* item, then discard
localparam [5:0]
    M_NEW = 6'd1 << MB_NEW,
    M_BIN = 6'd1 << MB_BIN,
    M_SKIP = 6'd1 << MB_SKIP,
    M_DISCARD = 6'd1 << MB_DISCARD,
    M_DROP = 6'd1 << MB_DROP;

// check configuration
initial begin
    if (DATA_W != 64 && DATA_W != 128 && DATA_W != 256 && DATA_W != 512) begin
        $error("Error: DATA_W must be 64, 128, 256 or 512 (instance %m)");
        $finish;
    end
    if (REQ_BYTES < 32 || REQ_BYTES > 4096) begin
        $error("Error: REQ_BYTES must be 32 to 4096 (instance %m)");
        $finish;
    end
    if (META_W < 1) begin
        $error("Error: META_W must be at least 1 (instance %m)");
        $finish;
    end
end

/*
 * input side: the frame header is read, the metadata word written and the
 * datagram counted as a first beat arrives.  Each beat is put in the form the
 * walker appends (a first beat without its frame header, dead lanes zeroed,
 * its byte count and byte mask, the protocol its first byte selects): first
 * beats go to a two-entry queue (pend_*), from which a datagram starts when
 * the one before it is done; the other beats go to a register slice, from
 * which the walker takes them while their datagram is walked.  A first beat
 * cannot overtake the beats before it (its datagram starts only after the
 * one before is done, which takes all of that one's beats), and the queue's
 * room is a register, so nothing of the walker's decision reaches
 * s_axis_tready or m_meta_valid.
 */
reg s_first_reg;                 // the next beat on s_axis starts a datagram
wire in_room;
wire pend_room;

assign s_axis_tready = s_first_reg ? pend_room && m_meta_ready : in_room;
assign m_meta_valid = s_axis_tvalid && s_first_reg && pend_room;
wire s_take = s_axis_tvalid && s_axis_tready;
wire push = s_take && s_first_reg;

// the beat with dead lanes zeroed
reg [DATA_W-1:0] s_beat;
integer i;
always @* begin
    for (i = 0; i < BYTES; i = i + 1) begin
        s_beat[8*i +: 8] = s_axis_tkeep[i] ? s_axis_tdata[8*i +: 8] : 8'd0;
    end
end

wire short_dgram = !s_axis_tkeep[7];     // fewer than 8 bytes (tkeep is contiguous)
wire [15:0] udp_req_id = {s_beat[7:0], s_beat[15:8]};
wire [15:0] udp_count = {s_beat[39:32], s_beat[47:40]};

assign m_meta_data = {s_meta, udp_req_id};

// what the walker appends: a first beat's bytes after the frame header, or
// the beat; worked out from tkeep directly (it is contiguous from lane 0)
wire [DATA_W+63:0] s_ext = {64'd0, s_beat};
wire [BYTES+7:0] keep_ext = {8'd0, s_axis_tkeep};
wire [BYTES-1:0] pl_mask = s_first_reg ? keep_ext[BYTES+7:8] : s_axis_tkeep;
wire [DATA_W-1:0] pl_data = s_first_reg ? s_ext[DATA_W+63:64] : s_beat;
reg [BW-1:0] pl_n;
always @* begin
    pl_n = {BW{1'b0}};
    for (i = 0; i < BYTES; i = i + 1) begin
        pl_n = pl_n + {{(BW-1){1'b0}}, pl_mask[i]};
    end
end
// the protocol these bytes set if they start the body (M_NEW: empty); a
// first beat's drop test is kept beside it and applied as the datagram
// starts (M_DROP: its bytes are discarded unread)
wire pl_drop = short_dgram || udp_count != 16'd1;
wire pl_bin = pl_data[7:0] == MC_MAGIC_REQ;
reg [5:0] pl_mode;
always @* begin
    pl_mode = 6'd0;
    pl_mode[MB_NEW] = !pl_mask[0];
    pl_mode[MB_BIN] = pl_mask[0] && pl_bin;
    pl_mode[MB_TEXT] = pl_mask[0] && !pl_bin;
end

wire [DATA_W-1:0] in_data;
wire [BYTES-1:0] in_mask;
wire [BW-1:0] in_n;
wire [5:0] in_mode;
wire in_last, in_valid, in_ready;

kv_skid #(
    .WIDTH(DATA_W + BYTES + BW + 6 + 1)
)
in_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({pl_data, pl_mask, pl_n, pl_mode, s_axis_tlast}),
    .s_valid(s_take && !s_first_reg),
    .s_ready(in_room),
    .m_data({in_data, in_mask, in_n, in_mode, in_last}),
    .m_valid(in_valid),
    .m_ready(in_ready)
);

reg stat_dgram_reg;
reg stat_short_reg;
reg stat_multi_reg;
reg stat_served_reg;

assign stat_dgram = stat_dgram_reg;
assign stat_short = stat_short_reg;
assign stat_multi = stat_multi_reg;
assign stat_served = stat_served_reg;

always @(posedge clk) begin
    if (s_take) begin
        s_first_reg <= s_axis_tlast;
    end
    stat_dgram_reg <= s_take && s_first_reg;
    stat_short_reg <= s_take && s_first_reg && short_dgram;
    stat_multi_reg <= s_take && s_first_reg && !short_dgram && udp_count != 16'd1;
    stat_served_reg <= s_take && s_first_reg && !short_dgram && udp_count == 16'd1;
    if (rst) begin
        s_first_reg <= 1'b1;
        stat_dgram_reg <= 1'b0;
        stat_short_reg <= 1'b0;
        stat_multi_reg <= 1'b0;
        stat_served_reg <= 1'b0;
    end
end

// the queue of first beats (input side, above)
localparam PEND_W = DATA_W + BYTES + BW + 6 + 3;
reg [PEND_W-1:0] pend_reg [0:1];
reg [1:0] pend_cnt_reg;          // beats queued
reg pend_head_reg;               // slot of the oldest
reg pend_wr_reg;                 // slot the next one goes to
wire pend_any = pend_cnt_reg != 2'd0;
assign pend_room = pend_cnt_reg != 2'd2;
wire [DATA_W-1:0] p_data;
wire [BYTES-1:0] p_mask;
wire [BW-1:0] p_n;
wire [5:0] p_mode;
wire p_last, p_drop, p_drop_hdr;
assign {p_data, p_mask, p_n, p_mode, p_last, p_drop, p_drop_hdr} = pend_reg[pend_head_reg];

/*
 * the text side counts as idle from the cycle after it was seen idle and the
 * walker gave it no byte (it becomes busy only through the walker's bytes),
 * so text_idle's logic stays off the decision path
 */
reg idle_reg;

/*
 * the walker: a byte window realigned so the current request starts at
 * byte 0, with a mask of the bytes it holds and the count less 24 and 25
 * beside the count, so that every test the decision needs is a register
 * bit, a mask bit or one carry chain between a header field and a register
 */
reg [8*W-1:0] win_reg;   // byte i at [8i +: 8]; bytes >= cnt are zero
reg [W-1:0] vld_reg;     // bit i: i < cnt
reg [CW-1:0] cnt_reg;
reg act_reg;                     // a datagram is being walked
reg tail_reg;                    // ... and its last beat is in the window
reg first_reg;                   // its first item is still to come
reg [5:0] mode_reg;              // M_NEW only while the window is empty
reg drop_hdr_reg;                // M_DROP: bad frame header (else too short)
reg [32:0] skip_reg;            // M_SKIP: bytes of the request still to skip; M_TEXT: 1
reg [32:0] skip_p1_reg;         // skip_reg + 1 (see skip_lt)
reg [8*32-1:0] hdr_reg;  // M_SKIP: header and 8 bytes after it
reg [CW:0] cnt_m24_reg;  // cnt - 24 and cnt - 25, two's complement: the request
reg [CW:0] cnt_m25_reg;  // tests compare them with body_len without an adder

/*
 * request header fields at the window start, and what the window holds of
 * the request: every test is a register bit, a comparison between registers
 * and a header field (one carry chain), or a mask bit
 */
wire [7:0] magic = win_reg[8*MC_HDR_MAGIC +: 8];
wire [31:0] body_len = {win_reg[8*MC_HDR_BODY_LEN +: 8], win_reg[8*(MC_HDR_BODY_LEN+1) +: 8],
                        win_reg[8*(MC_HDR_BODY_LEN+2) +: 8], win_reg[8*(MC_HDR_BODY_LEN+3) +: 8]};
wire [32:0] req_len = {1'b0, body_len} + {17'd0, MC_HDR_BYTES};
wire [32:0] cnt33 = {{(33-CW){1'b0}}, cnt_reg};
wire [CW-1:0] bl = body_len[CW-1:0];     // the body length when it fits
wire have_hdr = vld_reg[MC_HDR_BYTES-1];                 // cnt >= 24
wire magic_ok = magic == MC_MAGIC_REQ;
/*
 * the high bits of body_len are zero: groups of six ORed, then all groups
 * zero as the carry out of an increment (one LUT level and a carry chain,
 * where a comparison of the whole field would put a second level of LUTs
 * in front of its carry chain)
 */
localparam HG = (32 - CW + 5) / 6;       // groups of six high bits
wire [6*HG-1:0] body_hi = {{(6*HG-32+CW){1'b0}}, body_len[31:CW]};
reg [HG-1:0] hi_grp_zero;
integer g;
always @* begin
    for (g = 0; g < HG; g = g + 1) begin
        hi_grp_zero[g] = body_hi[6*g +: 6] == 6'd0;
    end
end
wire [HG:0] hi_inc = {1'b0, hi_grp_zero} + {{HG{1'b0}}, 1'b1};
wire hi_zero = hi_inc[HG];
// when have_hdr: cnt >= req_len, and (read only when it is) cnt > req_len;
// cnt - 24 and cnt - 25 are below 2^CW, so only the low bits of body_len
// are compared
wire have_req = hi_zero && {1'b0, bl} <= cnt_m24_reg;
wire more = $signed({1'b0, bl}) <= $signed(cnt_m25_reg);
wire have_32 = vld_reg[31];
wire skip_le = skip_reg <= cnt33;
// skip_reg < cnt, from a register of its own (a second test of skip_reg
// against cnt would be folded with skip_le into one sum, a LUT level deeper)
wire skip_lt = skip_p1_reg <= cnt33;
// req_len <= REQ_BYTES: body lengths 0 to REQ_K of the low bits, as a table
// (a function of CW bits, where a comparison would be a carry chain with a
// LUT level on each side)
wire [(1<<CW)-1:0] fit_table = ~({(1<<CW){1'b1}} << (REQ_K + 1));
wire lo_fits = fit_table[bl];
wire fits = hi_zero && lo_fits;
wire cnt_nz = vld_reg[0];
wire cnt_one = vld_reg[0] && !vld_reg[1];

// binary items leave through a register slice: emitting needs only its room
// (a register), never the decoder's ready
wire item_room;
wire item_valid;

/*
 * the decision.  What the window does this cycle is one of four kinds, whose
 * shifted windows and counts are all worked out beside the decision (below):
 *   C_NONE (0)  nothing
 *   C_SKIP (1)  skip_reg bytes: the rest of a skipped request, or a text byte
 *   C_REQ  (2)  the request at the start (req_len)
 *   C_ALL  (3)  every byte: the window holds the beat taken, if any (a
 *               datagram that ends gives up every byte, and the next one's
 *               first beat takes the window)
 * The two bits of the kind are written as one term per mode (the mode is
 * one-hot), and the rest is read from them: a datagram is done when it is
 * walked, its last beat is in and the kind is C_ALL; an item goes out exactly
 * when bit 1 is set in M_BIN, M_NEW and M_DROP, and in M_SKIP when the skip
 * ends or the datagram does.
 */
wire go = idle_reg && item_room;
wire bin_req = have_hdr && magic_ok && lo_fits && have_req;  // MC_K_BIN (have_req: hi_zero)
/*
 * every other outcome in M_BIN is taken a cycle late, from last cycle's tests
 * of the same window (*_reg, valid when the window neither moved nor took
 * bytes last cycle: steady_reg): a bad magic (MC_K_MAGIC, the rest
 * discarded), a request longer than REQ_BYTES (its body skipped), a
 * truncation.  Only a request that is taken is decided in its first cycle.
 */
reg steady_reg;
reg magic_bad_reg;               // the header's magic is not MC_MAGIC_REQ
reg big_reg;                     // a request longer than REQ_BYTES, 32 bytes held
reg trunc_reg;                   // none of the three: a truncation if the datagram has ended
wire known = steady_reg;
wire bin_magic = known && magic_bad_reg;
wire bin_big = known && big_reg;
wire text_valid = act_reg && mode_reg[MB_TEXT] && cnt_nz && !item_valid;
wire t_take = text_valid && m_text_ready;

wire ck1 = !act_reg || mode_reg[MB_DISCARD] ||
           (mode_reg[MB_BIN] && go && (bin_req || (known && (magic_bad_reg || (tail_reg && !big_reg))))) ||
           (mode_reg[MB_SKIP] && go && (!skip_le || (tail_reg && !skip_lt))) ||
           (mode_reg[MB_TEXT] && t_take && tail_reg && cnt_one) ||
           (mode_reg[MB_DROP] && go) ||
           (mode_reg[MB_NEW] && go && tail_reg);
wire ck0 = !act_reg || mode_reg[MB_DISCARD] ||
           (mode_reg[MB_BIN] && go && ((tail_reg && bin_req && !more) ||
                                       (known && (magic_bad_reg || (tail_reg && trunc_reg))))) ||
           (mode_reg[MB_SKIP] && go) ||
           (mode_reg[MB_TEXT] && t_take) ||
           (mode_reg[MB_DROP] && go) ||
           (mode_reg[MB_NEW] && go && tail_reg);
wire [1:0] ck = {ck1, ck0};
// (the same as act_reg && tail_reg && ck == C_ALL, written as its own terms
// so that it is not the AND of the two ORs above)
wire done = act_reg && tail_reg && (
            mode_reg[MB_DISCARD] ||
            (mode_reg[MB_BIN] && go && ((bin_req && !more) || (known && (magic_bad_reg || trunc_reg)))) ||
            (mode_reg[MB_SKIP] && go && !(skip_le && skip_lt)) ||
            (mode_reg[MB_TEXT] && t_take && cnt_one) ||
            (mode_reg[MB_DROP] && go) ||
            (mode_reg[MB_NEW] && go));

wire b_go = act_reg && mode_reg[MB_BIN] && go;
wire k_go = act_reg && mode_reg[MB_SKIP] && go;
wire e_magic = b_go && bin_magic;
wire load_hdr = b_go && bin_big;
wire e_big = k_go && skip_le;
wire k_rest = k_go && !skip_le;                              // the whole window is skipped
wire e_drop = act_reg && mode_reg[MB_DROP] && go;

wire emit = act_reg && ck1 && (mode_reg[MB_BIN] || mode_reg[MB_NEW] || mode_reg[MB_DROP]) ||
            k_go && (skip_le || tail_reg);
/*
 * the item, worked out per mode from the tests alone (it is read only when
 * emit is set, which brings in the rest): its kind, whether it is the
 * datagram's last (one that ends the datagram, or one that has the rest
 * discarded), and the bytes present of a truncated request
 */
reg [2:0] emit_kind;
reg emit_last;
reg [15:0] emit_cnt;
always @* begin
    emit_kind = MC_K_BIN;
    emit_last = 1'b0;
    emit_cnt = 16'd0;
    if (mode_reg[MB_BIN]) begin
        // what is not a request is decided from last cycle's tests (known)
        emit_kind = !known ? MC_K_BIN : magic_bad_reg ? MC_K_MAGIC : trunc_reg ? MC_K_TRUNC : MC_K_BIN;
        emit_last = (known && (magic_bad_reg || trunc_reg)) || (tail_reg && !more);
        emit_cnt = {{(16-CW){1'b0}}, cnt_reg};
    end
    if (mode_reg[MB_SKIP]) begin
        emit_kind = skip_le ? MC_K_BIG : MC_K_TRUNC;
        emit_last = tail_reg && (!skip_le || !skip_lt);
        emit_cnt = MC_HDR_BYTES;
    end
    if (mode_reg[MB_NEW]) begin
        emit_kind = MC_K_EMPTY;
        emit_last = 1'b1;
    end
    if (mode_reg[MB_DROP]) begin
        emit_kind = drop_hdr_reg ? MC_K_DROP_HDR : MC_K_DROP_SHORT;
        emit_last = 1'b1;
    end
end
wire emit_hdr = mode_reg[MB_SKIP];       // item data from hdr_reg instead of the window

reg [5:0] mode_next;
reg [32:0] skip_next;
reg [32:0] skip_p1_next;
// skip_reg - cnt, from cnt - 24 (a sum of skip_reg and cnt would take the
// operands of skip_le, and Yosys would fold that test into it)
wire [32:0] cnt_m24_33 = {{(32-CW){cnt_m24_reg[CW]}}, cnt_m24_reg};
always @* begin
    mode_next = mode_reg;
    skip_next = skip_reg;
    skip_p1_next = skip_p1_reg;
    if (e_drop || e_magic) begin
        mode_next = M_DISCARD;
    end
    if (load_hdr) begin
        mode_next = M_SKIP;
        skip_next = req_len;
        skip_p1_next = req_len + 33'd1;
    end
    if (e_big) begin
        mode_next = M_BIN;
    end
    if (k_rest) begin
        skip_next = skip_reg - cnt_m24_33 - 33'd24;
        skip_p1_next = skip_p1_reg - cnt_m24_33 - 33'd24;
    end
end

assign m_text_data = win_reg[7:0];
assign m_text_first = first_reg;
assign m_text_last = tail_reg && cnt_one;
assign m_text_valid = text_valid;

kv_skid #(
    .WIDTH(3 + 1 + 1 + 8*REQ_BYTES + 16)
)
item_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({emit_kind, first_reg, emit_last,
             emit_hdr ? {{(8*REQ_BYTES-8*32){1'b0}}, hdr_reg} : win_reg[8*REQ_BYTES-1:0], emit_cnt}),
    .s_valid(emit),
    .s_ready(item_room),
    .m_data({m_item_kind, m_item_first, m_item_last, m_item_data, m_item_cnt}),
    .m_valid(item_valid),
    .m_ready(m_item_ready)
);

assign m_item_valid = item_valid;

/*
 * the window's beats: the next datagram's first beat when the current one is
 * done (or none is walked); a further beat when the window has room for it
 * before this cycle's bytes leave (cnt + BYTES <= W: byte W - BYTES not
 * held), which keeps the refill off the decision path.  It costs no
 * throughput: the window is refilled whenever it holds fewer than
 * W - BYTES >= REQ_BYTES bytes, so a request that fits is never starved;
 * and with requests of at most BYTES bytes taken one per cycle, the count
 * never falls when it is at most W - BYTES and stays at least
 * W - BYTES + 1 - BYTES >= BYTES after a cycle without a refill
 * (W >= 3*BYTES - 1), so they flow at one per cycle.
 */
wire take_cont = in_valid && act_reg && !tail_reg && !vld_reg[W-BYTES];
wire take_start = pend_any && (!act_reg || done);
assign in_ready = take_cont;

/*
 * the next window: appending the beat at cnt before the bytes leave is the
 * same as after, because the beat fits behind cnt (take_cont) and the bytes
 * above cnt are zero; so the append does not wait for the decision.  Each
 * kind's window, mask and count are worked out from registers and the
 * header field, and the decision only selects one.
 */
wire [8*W-1:0] app_ext = {{(8*W-DATA_W){1'b0}}, take_cont ? in_data : {DATA_W{1'b0}}};
wire [W-1:0] app_mask = {{(W-BYTES){1'b0}}, take_cont ? in_mask : {BYTES{1'b0}}};
(* keep *) wire [8*W-1:0] comb;
assign comb = win_reg | (app_ext << {cnt_reg, 3'b000});
(* keep *) wire [W-1:0] comb_vld;
assign comb_vld = vld_reg | (app_mask << cnt_reg);

// C_ALL: the beat taken, as it is: a continuation beat while the datagram
// goes on, else the next datagram's first beat (without its frame header)
wire walking = act_reg && !tail_reg;
wire [DATA_W-1:0] all_data = walking ? (take_cont ? in_data : {DATA_W{1'b0}}) :
                                       (pend_any ? p_data : {DATA_W{1'b0}});
wire [BYTES-1:0] all_mask = walking ? (take_cont ? in_mask : {BYTES{1'b0}}) :
                                      (pend_any ? p_mask : {BYTES{1'b0}});
wire [BW-1:0] all_bn = walking ? (take_cont ? in_n : {BW{1'b0}}) : (pend_any ? p_n : {BW{1'b0}});
(* keep *) wire [8*W-1:0] all_win;
assign all_win = {{(8*W-DATA_W){1'b0}}, all_data};
(* keep *) wire [W-1:0] all_vld;
assign all_vld = {{(W-BYTES){1'b0}}, all_mask};
wire [CW-1:0] all_n = {{(CW-BW){1'b0}}, all_bn};

// C_REQ: 24 + body_len bytes (< W when it fits)
(* keep *) wire [8*W-1:0] req_win;
assign req_win = (comb >> (8 * MC_HDR_BYTES)) >> {bl, 3'b000};
(* keep *) wire [W-1:0] req_vld;
assign req_vld = (comb_vld >> MC_HDR_BYTES) >> bl;

// C_SKIP: skip_reg bytes (at most cnt)
(* keep *) wire [8*W-1:0] skip_win;
assign skip_win = comb >> {skip_reg[CW-1:0], 3'b000};
(* keep *) wire [W-1:0] skip_vld;
assign skip_vld = comb_vld >> skip_reg[CW-1:0];

// the count, and the count less 24 and 25, for each kind: each worked out
// from registers with and without the beat appended, then chosen by take_cont
wire [CW:0] in_n1 = {{(CW-BW+1){1'b0}}, in_n};
wire [CW:0] all_n1 = {1'b0, all_n};
wire [CW:0] bl1 = {1'b0, bl};
wire [CW:0] skip1 = {1'b0, skip_reg[CW-1:0]};
wire [CW:0] m24 = MC_HDR_BYTES[CW:0];
wire [CW:0] m25 = MC_HDR_BYTES[CW:0] + 1'b1;
wire [CW:0] cnt1 = {1'b0, cnt_reg};
// (the sums never take the two operands of a header test: Yosys would fold
// the test into the sum, and the test would no longer be a bare carry chain)
wire [CW:0] m48 = m24 + m24;
wire [CW:0] m49 = m48 + 1'b1;
wire [3*(CW+1)-1:0] cnts_none_0 = {cnt_m25_reg, cnt_m24_reg, cnt1};
wire [3*(CW+1)-1:0] cnts_none_1 = {cnt_m25_reg + in_n1, cnt_m24_reg + in_n1, cnt1 + in_n1};
wire [3*(CW+1)-1:0] cnts_skip_0 = {cnt_m25_reg - skip1, cnt_m24_reg - skip1, cnt_m24_reg + m24 - skip1};
wire [3*(CW+1)-1:0] cnts_skip_1 = {cnt_m25_reg + in_n1 - skip1, cnt_m24_reg + in_n1 - skip1,
                                   cnt_m24_reg + in_n1 + m24 - skip1};
wire [3*(CW+1)-1:0] cnts_req_0 = {cnt1 - m49 - bl1, cnt1 - m48 - bl1, cnt1 - m24 - bl1};
wire [3*(CW+1)-1:0] cnts_req_1 = {cnt1 + in_n1 - m49 - bl1, cnt1 + in_n1 - m48 - bl1,
                                  cnt1 + in_n1 - m24 - bl1};
wire [3*(CW+1)-1:0] cnts_none = take_cont ? cnts_none_1 : cnts_none_0;
wire [3*(CW+1)-1:0] cnts_skip = take_cont ? cnts_skip_1 : cnts_skip_0;
wire [3*(CW+1)-1:0] cnts_req = take_cont ? cnts_req_1 : cnts_req_0;
wire [3*(CW+1)-1:0] cnts_all = {all_n1 - m25, all_n1 - m24, all_n1};

reg [8*W-1:0] win_next;
reg [W-1:0] vld_next;
reg [3*(CW+1)-1:0] cnts_next;
always @* begin
    case (ck)
        2'd3: begin
            win_next = all_win;
            vld_next = all_vld;
            cnts_next = cnts_all;
        end
        2'd2: begin
            win_next = req_win;
            vld_next = req_vld;
            cnts_next = cnts_req;
        end
        2'd1: begin
            win_next = skip_win;
            vld_next = skip_vld;
            cnts_next = cnts_skip;
        end
        default: begin
            win_next = comb;
            vld_next = comb_vld;
            cnts_next = cnts_none;
        end
    endcase
end

always @(posedge clk) begin
    win_reg <= win_next;
    vld_reg <= vld_next;
    cnt_reg <= cnts_next[CW-1:0];
    cnt_m24_reg <= cnts_next[CW+1 +: CW+1];
    cnt_m25_reg <= cnts_next[2*(CW+1) +: CW+1];
    mode_reg <= mode_next;
    skip_reg <= skip_next;
    skip_p1_reg <= skip_p1_next;
    if (load_hdr) begin
        hdr_reg <= win_reg[8*32-1:0];
    end
    if (done) begin
        act_reg <= 1'b0;
    end
    if (emit || (text_valid && m_text_ready)) begin
        first_reg <= 1'b0;
    end
    if (take_cont) begin
        tail_reg <= in_last;
        // the first body byte chooses the protocol
        if (mode_reg[MB_NEW]) begin
            mode_reg <= in_mode;
        end
    end
    idle_reg <= text_idle && !t_take;
    // (the two tests are written out again in trunc_reg on purpose: named
    // wires shared by the three registers, or the aliases above inlined,
    // make Yosys 0.23 map this module at 7 LUT levels instead of 6)
    magic_bad_reg <= have_hdr && !magic_ok;
    big_reg <= have_hdr && magic_ok && have_32 && !fits;
    trunc_reg <= !bin_req && !(have_hdr && !magic_ok) && !(have_hdr && magic_ok && have_32 && !fits);
    steady_reg <= act_reg && !ck1 && !ck0 && !take_cont;
    if (push) begin
        pend_reg[pend_wr_reg] <= {pl_data, pl_mask, pl_n, pl_mode, s_axis_tlast, pl_drop, !short_dgram};
        pend_wr_reg <= !pend_wr_reg;
    end
    if (take_start) begin
        pend_head_reg <= !pend_head_reg;
    end
    pend_cnt_reg <= pend_cnt_reg + {1'b0, push} - {1'b0, take_start};
    if (take_start) begin
        act_reg <= 1'b1;
        tail_reg <= p_last;
        first_reg <= 1'b1;
        drop_hdr_reg <= p_drop_hdr;
        mode_reg <= p_drop ? M_DROP : p_mode;
        skip_reg <= 33'd1;
        skip_p1_reg <= 33'd2;
    end

    if (rst) begin
        cnt_reg <= {CW{1'b0}};
        cnt_m24_reg <= -m24;
        cnt_m25_reg <= -m25;
        vld_reg <= {W{1'b0}};
        win_reg <= {8*W{1'b0}};
        act_reg <= 1'b0;
        tail_reg <= 1'b0;
        first_reg <= 1'b0;
        mode_reg <= M_NEW;
        skip_reg <= 33'd0;
        skip_p1_reg <= 33'd1;
        idle_reg <= 1'b0;
        steady_reg <= 1'b0;
        pend_cnt_reg <= 2'd0;
        pend_head_reg <= 1'b0;
        pend_wr_reg <= 1'b0;
    end
end

// the frame header bytes of s_ext are read from s_beat; the high bytes of a
// header-field comparison's operands are zero
wire unused = &{1'b0, s_ext[63:0], keep_ext[7:0], cnts_next[CW]};

endmodule

`resetall
