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
 * (byte i of a beat is tdata[8i +: 8]), every beat but the last full, one
 * datagram per packet (tlast), and the datagram's metadata on s_meta, valid
 * with the first beat.
 *
 * Each datagram starts with the 8-byte memcached UDP frame header (request
 * id, sequence number, datagram count, reserved).  It is taken straight from
 * the first beat; {s_meta, request id} goes to m_meta_* (one word per
 * datagram, in datagram order).  A datagram shorter than 8 bytes, or whose
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
 *              24 and its header); the item is the datagram's last
 *   MC_K_MAGIC a header whose magic is not 0x80: the item is the datagram's
 *              last and the rest of the datagram is discarded
 *   MC_K_EMPTY a datagram with nothing after the frame header
 * A new request is taken every cycle when the window holds it whole; the
 * window is refilled by a full beat whenever it has room, so requests of at
 * most BYTES bytes flow at one per cycle.  m_item_first / m_item_last mark
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
 * next datagram's first beat is taken in the cycle the current one is
 * finished, so one-beat datagrams flow at one per cycle.
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
localparam [32:0] REQ_BYTES33 = 33'd0 + REQ_BYTES;
localparam [32:0] W33 = 33'd0 + W;
localparam [32:0] BYTES33 = 33'd0 + BYTES;

// walker modes
localparam [2:0]
    M_NEW = 3'd0,       // datagram started, protocol not known yet (window empty)
    M_BIN = 3'd1,
    M_TEXT = 3'd2,
    M_SKIP = 3'd3,      // skipping the body of a MC_K_BIG request
    M_DISCARD = 3'd4,   // discarding the rest of the datagram
    M_DROP = 3'd5;      // emit the MC_K_DROP_* item, then discard

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

reg [8*W-1:0] win_reg;   // byte i at [8i +: 8]; bytes >= cnt are zero
reg [CW-1:0] cnt_reg;
reg act_reg;                     // a datagram is being walked
reg tail_reg;                    // ... and its last beat is in the window
reg first_reg;                   // its first item is still to come
reg [2:0] mode_reg;
reg drop_hdr_reg;                // M_DROP: bad frame header (else too short)
reg [32:0] skip_reg;            // M_SKIP: bytes of the request still to skip
reg [8*32-1:0] hdr_reg;  // M_SKIP: header and 8 bytes after it

reg stat_dgram_reg;
reg stat_short_reg;
reg stat_multi_reg;
reg stat_served_reg;

assign stat_dgram = stat_dgram_reg;
assign stat_short = stat_short_reg;
assign stat_multi = stat_multi_reg;
assign stat_served = stat_served_reg;

/*
 * request header fields at the window start, and what the window holds of
 * the request (every comparison between registers, none behind an adder
 * of a header field: req_len = body_len + 24 <= x is body_len <= x - 24)
 */
wire [7:0] magic = win_reg[8*MC_HDR_MAGIC +: 8];
wire [31:0] body_len = {win_reg[8*MC_HDR_BODY_LEN +: 8], win_reg[8*(MC_HDR_BODY_LEN+1) +: 8],
                        win_reg[8*(MC_HDR_BODY_LEN+2) +: 8], win_reg[8*(MC_HDR_BODY_LEN+3) +: 8]};
wire [32:0] req_len = {1'b0, body_len} + {17'd0, MC_HDR_BYTES};
wire [32:0] cnt33 = {{(33-CW){1'b0}}, cnt_reg};
wire have_hdr = cnt33 >= {17'd0, MC_HDR_BYTES};
wire [32:0] cnt_m24 = cnt33 - {17'd0, MC_HDR_BYTES};   // used only when have_hdr
wire fits = {1'b0, body_len} <= REQ_BYTES33 - {17'd0, MC_HDR_BYTES};
wire have_req = {1'b0, body_len} <= cnt_m24;
wire req_all = {1'b0, body_len} == cnt_m24;              // cnt33 == req_len
wire have_32 = cnt33 >= 33'd32;
wire skip_le = skip_reg <= cnt33;
wire skip_eq = skip_reg == cnt33;
wire cnt_one = cnt_reg == {{(CW-1){1'b0}}, 1'b1};
wire cnt_nz = cnt_reg != {CW{1'b0}};

// binary items leave through a register slice: emitting needs only its room
// (a register), never the decoder's ready
wire item_room;
wire item_valid;

wire [2:0] mode_eff = (mode_reg == M_NEW && cnt_nz) ?
                      (magic == MC_MAGIC_REQ ? M_BIN : M_TEXT) : mode_reg;

/*
 * what the window does this cycle: how many bytes it gives up (ck), as one of
 * five kinds whose shifted windows and counts are all worked out beside the
 * decision (below)
 */
localparam [2:0]
    C_NONE = 3'd0,      // nothing
    C_ALL = 3'd1,       // every byte (cnt)
    C_REQ = 3'd2,       // the request at the start (req_len)
    C_SKIP = 3'd3,      // the rest of a skipped request (skip_reg)
    C_ONE = 3'd4;       // one text byte

reg [2:0] ck;
reg emit;
reg [2:0] emit_kind;
reg emit_last;
reg emit_hdr;              // item data from hdr_reg instead of the window
reg [15:0] emit_cnt;
reg done;                  // the datagram is finished this cycle (window empty after)
reg [2:0] mode_next;
reg [32:0] skip_next;
reg load_hdr;
reg text_valid;

always @* begin
    ck = C_NONE;
    emit = 1'b0;
    emit_kind = MC_K_BIN;
    emit_last = 1'b0;
    emit_hdr = 1'b0;
    emit_cnt = 16'd0;
    done = 1'b0;
    mode_next = mode_eff;
    skip_next = skip_reg;
    load_hdr = 1'b0;
    text_valid = 1'b0;
    if (act_reg) begin
        case (mode_eff)
            M_NEW: begin
                // window empty: a datagram with no request bytes, once it has ended
                if (tail_reg && text_idle && item_room) begin
                    emit = 1'b1;
                    emit_kind = MC_K_EMPTY;
                    emit_last = 1'b1;
                    done = 1'b1;
                end
            end
            M_DROP: begin
                if (text_idle && item_room) begin
                    emit = 1'b1;
                    emit_kind = drop_hdr_reg ? MC_K_DROP_HDR : MC_K_DROP_SHORT;
                    emit_last = 1'b1;
                    ck = C_ALL;
                    done = tail_reg;
                    mode_next = M_DISCARD;
                end
            end
            M_BIN: begin
                if (text_idle && item_room) begin
                    if (have_hdr && magic != MC_MAGIC_REQ) begin
                        emit = 1'b1;
                        emit_kind = MC_K_MAGIC;
                        emit_last = 1'b1;
                        ck = C_ALL;
                        done = tail_reg;
                        mode_next = M_DISCARD;
                    end else if (have_hdr && fits && have_req) begin
                        emit = 1'b1;
                        emit_kind = MC_K_BIN;
                        emit_last = tail_reg && req_all;
                        ck = C_REQ;
                        done = emit_last;
                    end else if (have_hdr && !fits && have_32) begin
                        load_hdr = 1'b1;
                        skip_next = req_len;
                        mode_next = M_SKIP;
                    end else if (tail_reg) begin
                        emit = 1'b1;
                        emit_kind = MC_K_TRUNC;
                        emit_last = 1'b1;
                        emit_cnt = {{(16-CW){1'b0}}, cnt_reg};
                        ck = C_ALL;
                        done = 1'b1;
                    end
                end
            end
            M_SKIP: begin
                if (text_idle && item_room) begin
                    if (skip_le) begin
                        emit = 1'b1;
                        emit_kind = MC_K_BIG;
                        emit_hdr = 1'b1;
                        emit_last = tail_reg && skip_eq;
                        ck = C_SKIP;
                        skip_next = 33'd0;
                        done = emit_last;
                        mode_next = M_BIN;
                    end else begin
                        ck = C_ALL;
                        skip_next = skip_reg - cnt33;
                        if (tail_reg) begin
                            emit = 1'b1;
                            emit_kind = MC_K_TRUNC;
                            emit_hdr = 1'b1;
                            emit_last = 1'b1;
                            emit_cnt = MC_HDR_BYTES;
                            done = 1'b1;
                        end
                    end
                end
            end
            M_TEXT: begin
                text_valid = cnt_nz && !item_valid;
                if (text_valid && m_text_ready) begin
                    ck = C_ONE;
                    done = tail_reg && cnt_one;
                end
            end
            default: begin // M_DISCARD
                ck = C_ALL;
                done = tail_reg;
            end
        endcase
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
 * input side: a new datagram's first beat when the current one is done; a
 * further beat when the window has room for it before this cycle's bytes
 * leave (cnt + BYTES <= W), which keeps the refill off the decision path.
 * It costs no throughput: the window is refilled whenever it holds fewer
 * than W - BYTES >= REQ_BYTES bytes, so a request that fits is never starved;
 * and with requests of at most BYTES bytes taken one per cycle, the count
 * never falls when it is at most W - BYTES and stays at least
 * W - BYTES + 1 - BYTES >= BYTES after a cycle without a refill
 * (W >= 3*BYTES - 1), so they flow at one per cycle as before.
 */
wire start_ok = !act_reg || done;
wire cont_ok = act_reg && !tail_reg && (cnt33 + BYTES33 <= W33);
wire take_start = s_axis_tvalid && start_ok && m_meta_ready;
wire take_cont = s_axis_tvalid && cont_ok;

assign s_axis_tready = start_ok ? m_meta_ready : cont_ok;
assign m_meta_valid = s_axis_tvalid && start_ok;

// bytes of the beat (tkeep is contiguous from lane 0) and its data with dead lanes zeroed
reg [BW-1:0] in_n;
reg [DATA_W-1:0] in_data;
integer i;
always @* begin
    in_n = {BW{1'b0}};
    for (i = 0; i < BYTES; i = i + 1) begin
        in_n = in_n + {{(BW-1){1'b0}}, s_axis_tkeep[i]};
        in_data[8*i +: 8] = s_axis_tkeep[i] ? s_axis_tdata[8*i +: 8] : 8'd0;
    end
end

// first beat: the frame header is bytes 0..7, the request bytes follow
wire [DATA_W+63:0] in_ext = {64'd0, in_data};
wire [DATA_W-1:0] start_data = in_ext[DATA_W+63:64];
wire short_dgram = in_n < 8;
wire [15:0] udp_req_id = {in_data[7:0], in_data[15:8]};
wire [15:0] udp_count = {in_data[39:32], in_data[47:40]};

assign m_meta_data = {s_meta, udp_req_id};

/*
 * the next window: appending the beat at cnt before the bytes leave is the
 * same as after, because the beat fits behind cnt (cont_ok) and the bytes
 * above cnt are zero; so the append does not wait for the decision
 */
wire [8*W-1:0] app_ext = {{(8*W-DATA_W){1'b0}}, take_cont ? in_data : {DATA_W{1'b0}}};
wire [CW-1:0] app_n = take_cont ? {{(CW-BW){1'b0}}, in_n} : {CW{1'b0}};
wire [8*W-1:0] comb = win_reg | (app_ext << {cnt_reg, 3'b000});
wire [CW-1:0] cnt_all = cnt_reg + app_n;
wire [BW-1:0] start_bytes = short_dgram ? {BW{1'b0}} : in_n - 8;
wire [CW-1:0] start_n = {{(CW-BW){1'b0}}, start_bytes};
wire [8*W-1:0] start_win = {{(8*W-DATA_W){1'b0}}, short_dgram ? {DATA_W{1'b0}} : start_data};

// bytes given up: a whole request is req_len = 24 + body_len bytes (< W when it fits)
reg [CW-1:0] consume;
always @* begin
    case (ck)
        C_ALL: consume = cnt_reg;
        C_REQ: consume = MC_HDR_BYTES[CW-1:0] + body_len[CW-1:0];
        C_SKIP: consume = skip_reg[CW-1:0];
        C_ONE: consume = {{(CW-1){1'b0}}, 1'b1};
        default: consume = {CW{1'b0}};
    endcase
end

wire [8*W-1:0] win_next = take_start ? start_win : comb >> {consume, 3'b000};
wire [CW-1:0] cnt_next = take_start ? start_n : cnt_all - consume;

always @(posedge clk) begin
    win_reg <= win_next;
    cnt_reg <= cnt_next;
    mode_reg <= mode_next;
    skip_reg <= skip_next;
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
        tail_reg <= s_axis_tlast;
    end
    stat_dgram_reg <= take_start;
    stat_short_reg <= take_start && short_dgram;
    stat_multi_reg <= take_start && !short_dgram && udp_count != 16'd1;
    stat_served_reg <= take_start && !short_dgram && udp_count == 16'd1;
    if (take_start) begin
        act_reg <= 1'b1;
        tail_reg <= s_axis_tlast;
        first_reg <= 1'b1;
        drop_hdr_reg <= !short_dgram;
        mode_reg <= (short_dgram || udp_count != 16'd1) ? M_DROP : M_NEW;
    end

    if (rst) begin
        cnt_reg <= {CW{1'b0}};
        win_reg <= {8*W{1'b0}};
        act_reg <= 1'b0;
        tail_reg <= 1'b0;
        first_reg <= 1'b0;
        mode_reg <= M_NEW;
        skip_reg <= 33'd0;
        stat_dgram_reg <= 1'b0;
        stat_short_reg <= 1'b0;
        stat_multi_reg <= 1'b0;
        stat_served_reg <= 1'b0;
    end
end

// the frame header bytes of in_ext are read from in_data; the high bytes of a
// header-field comparison's operands are zero
wire unused = &{1'b0, in_ext[63:0]};

endmodule

`resetall
