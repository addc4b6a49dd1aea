/*

pynq-kv: Ethernet front-end, receive path (L2-L4)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Ethernet/IPv4/UDP receive path with ARP and ICMP echo detection
 * (docs/frontend_rtl.md, "Ethernet front-end: L2-L4")
 *
 * Store-and-forward: every beat from the MAC is written into the frame FIFO
 * (s_axis_rx_tready is held high: one beat per cycle, never back-pressured)
 * while a beat pipeline works out the frame's fate:
 *
 *   A  input register; frame FIFO write; header capture (first HDR_BYTES)
 *      and byte masks of the IPv4 header and of the L4 segment in this beat
 *   B  masked 16-bit word sums in groups of 8; the L4 header picked by IHL
 *   C  sums accumulated (UDP pseudo-header added on the last beat); at the
 *      last beat every check but the two checksums, and the descriptor
 *   D  checksums folded and compared; the outcome (one per frame); accepted
 *      frames push their descriptor, every frame pulses its counters
 *
 * A read engine takes descriptors in order, reads the payload's beats (the
 * bytes after the 8-byte UDP or ICMP header) and shifts them by (payload
 * offset mod KEEP_W) so that payload byte 0 is in byte 0.  UDP payloads go
 * to m_axis_pl, ICMP echo data and ARP requests (one empty beat) to
 * m_axis_ctl for kv_eth_tx.  The payload offset is 42 + 4k (+4 with a VLAN
 * tag), so the shift is 2 mod 4: one of KEEP_W/4 amounts.
 *
 * Frame FIFO space: a frame that finds the FIFO full, is too long or has
 * tuser set stops being written and gives its space back at its last beat;
 * a frame dropped later gives its space back once every accepted frame
 * before it has been read (free_ptr below).
 *
 * stat_rx pulses for one cycle per frame: bit 0 (rx_frames) and the bit of
 * the frame's outcome (1 rx_udp_payloads, 2 arp_replies, 3 icmp_replies,
 * 4..17 the drop reasons in the order of docs/frontend_rtl.md).
 */
module kv_eth_rx #
(
    // Stream width in bits: 64 (10G/25G MAC) or 512 (100G CMAC)
    parameter DATA_W = 64,
    // tkeep width: must be DATA_W/8
    parameter KEEP_W = DATA_W/8,
    // Longest accepted frame in bytes (no FCS): 64 to 9022
    parameter MAX_FRAME = 1522,
    // Frame FIFO size in bytes: a power of two, at least two frames of MAX_FRAME
    parameter FIFO_BYTES = 16384,
    // Accepted frames that may wait in the FIFO: a power of two from 4 to 1024
    parameter DESC_DEPTH = 64
)
(
    input  wire                  clk,
    input  wire                  rst,

    /*
     * Configuration
     */
    input  wire [47:0]           cfg_mac,
    input  wire [31:0]           cfg_ip,
    input  wire [15:0]           cfg_udp_port,

    /*
     * Frames from the MAC (no FCS); tuser = bad frame
     */
    input  wire [DATA_W-1:0]     s_axis_rx_tdata,
    input  wire [KEEP_W-1:0]     s_axis_rx_tkeep,
    input  wire                  s_axis_rx_tvalid,
    output wire                  s_axis_rx_tready,
    input  wire                  s_axis_rx_tlast,
    input  wire                  s_axis_rx_tuser,

    /*
     * UDP payloads to the memcached core
     */
    output wire [DATA_W-1:0]     m_axis_pl_tdata,
    output wire [KEEP_W-1:0]     m_axis_pl_tkeep,
    output wire                  m_axis_pl_tvalid,
    input  wire                  m_axis_pl_tready,
    output wire                  m_axis_pl_tlast,
    output wire [128:0]          m_axis_pl_meta,

    /*
     * ARP requests and ICMP echo data to kv_eth_tx
     */
    output wire [DATA_W-1:0]     m_axis_ctl_tdata,
    output wire [KEEP_W-1:0]     m_axis_ctl_tkeep,
    output wire                  m_axis_ctl_tvalid,
    input  wire                  m_axis_ctl_tready,
    output wire                  m_axis_ctl_tlast,
    output wire [179:0]          m_axis_ctl_meta,

    /*
     * Counter pulses: bit 0 every frame, bit k its outcome k
     */
    output reg  [17:0]           stat_rx
);

localparam LG_K = $clog2(KEEP_W);
// header bytes captured: up to the end of the L4 header with a tag and IHL 15
localparam HDR_BEATS = (86 + KEEP_W - 1) / KEEP_W;
localparam HDR_BYTES = HDR_BEATS * KEEP_W;
localparam FIFO_BEATS = FIFO_BYTES / KEEP_W;
localparam AW = $clog2(FIFO_BEATS);
localparam [31:0] MAX_BEATS = (MAX_FRAME + KEEP_W - 1) / KEEP_W;
localparam [31:0] KEEP_M1 = KEEP_W - 1;
localparam [31:0] KEEP_32 = KEEP_W;
// 16-bit words per beat, per adder group, groups
localparam WORDS = KEEP_W / 2;
localparam GW = WORDS < 8 ? WORDS : 8;
localparam NG = WORDS / GW;
localparam PW = 20;           // group sum width (8 words of 16 bits fit in 19)
localparam SW = LG_K - 2;     // shift index width: shift = 4*sidx + 2 bytes
localparam OF_DEPTH = 4;      // output FIFO beats
localparam MF_DEPTH = 8;      // output metadata FIFO frames

// outcome codes (= stat_rx bit = counter index)
localparam [4:0] O_UDP = 5'd1, O_ARP = 5'd2, O_ICMP = 5'd3, O_MAC_ERR = 5'd4, O_OVERSIZE = 5'd5,
                 O_RUNT = 5'd6, O_NOT_US = 5'd7, O_ETYPE = 5'd8, O_ARP_BAD = 5'd9, O_LEN = 5'd10,
                 O_IP_CSUM = 5'd11, O_FRAG = 5'd12, O_PROTO = 5'd13, O_PORT = 5'd14,
                 O_UDP_CSUM = 5'd15, O_ICMP_BAD = 5'd16, O_FULL = 5'd17;

// check configuration
initial begin
    if (DATA_W != 64 && DATA_W != 512) begin
        $error("Error: DATA_W must be 64 or 512 (instance %m)");
        $finish;
    end
    if (KEEP_W * 8 != DATA_W) begin
        $error("Error: KEEP_W must be DATA_W/8 (instance %m)");
        $finish;
    end
    if (MAX_FRAME < 64 || MAX_FRAME > 9022) begin
        $error("Error: MAX_FRAME must be 64 to 9022 (instance %m)");
        $finish;
    end
    if ((FIFO_BYTES & (FIFO_BYTES - 1)) != 0 || FIFO_BEATS < 2 * MAX_BEATS || FIFO_BEATS < 4) begin
        $error("Error: FIFO_BYTES must be a power of two holding two MAX_FRAME frames (instance %m)");
        $finish;
    end
    if (DESC_DEPTH < 4 || DESC_DEPTH > 1024 || (DESC_DEPTH & (DESC_DEPTH - 1)) != 0) begin
        $error("Error: DESC_DEPTH must be a power of two from 4 to 1024 (instance %m)");
        $finish;
    end
end

// lanes i with beat*KEEP_W + i >= bound
function [KEEP_W-1:0] therm(input [23:0] bound, input [15:0] beat);
    integer i;
    reg [23:0] hi;
    begin
        hi = bound >> LG_K;
        for (i = 0; i < KEEP_W; i = i + 1) begin
            if (hi < {8'd0, beat}) begin
                therm[i] = 1'b1;
            end else if (hi > {8'd0, beat}) begin
                therm[i] = 1'b0;
            end else begin
                therm[i] = i >= bound[LG_K-1:0];
            end
        end
    end
endfunction

// lanes i < n (n = 1..KEEP_W)
function [KEEP_W-1:0] low_lanes(input [LG_K:0] n);
    integer i;
    begin
        for (i = 0; i < KEEP_W; i = i + 1) begin
            low_lanes[i] = i < n;
        end
    end
endfunction

// one byte per set lane
function [DATA_W-1:0] byte_mask(input [KEEP_W-1:0] keep);
    integer i;
    begin
        for (i = 0; i < KEEP_W; i = i + 1) begin
            byte_mask[8*i +: 8] = {8{keep[i]}};
        end
    end
endfunction

function [LG_K:0] popcount(input [KEEP_W-1:0] keep);
    integer i;
    begin
        popcount = {LG_K+1{1'b0}};
        for (i = 0; i < KEEP_W; i = i + 1) begin
            popcount = popcount + {{LG_K{1'b0}}, keep[i]};
        end
    end
endfunction

// a 32-bit sum folds to the one's-complement 0xFFFF (the check of a correct checksum):
// s = lo + hi is at most 0x1FFFE, and folds to s[15:0] + s[16]
function sum_ok(input [31:0] x);
    reg [16:0] s;
    begin
        s = {1'b0, x[15:0]} + {1'b0, x[31:16]};
        sum_ok = s == 17'h0FFFF || s == 17'h1FFFE;
    end
endfunction

/*
 * Stage A: input register, frame FIFO write, header capture
 */
reg rdy;
assign s_axis_rx_tready = rdy;
wire in_fire = s_axis_rx_tvalid && rdy;

reg [15:0] beat_cnt;
reg a_valid;
reg a_last;
reg a_user;
reg [DATA_W-1:0] a_data;
reg [KEEP_W-1:0] a_keep;
reg [15:0] a_beat;
reg [HDR_BEATS-1:0] a_hsel;     // one-hot: a_beat == i, for the header capture
reg [HDR_BEATS-1:0] i_hsel;     // one-hot: beat_cnt == i (the beat at the input)

always @(posedge clk) begin
    a_hsel <= i_hsel;
    a_data <= s_axis_rx_tdata;
    a_keep <= s_axis_rx_tkeep;
    a_last <= s_axis_rx_tlast;
    a_user <= s_axis_rx_tuser;
    a_beat <= beat_cnt;
    if (rst) begin
        rdy <= 1'b0;
        a_valid <= 1'b0;
        beat_cnt <= 16'd0;
        i_hsel <= {{HDR_BEATS-1{1'b0}}, 1'b1};
    end else begin
        rdy <= 1'b1;
        a_valid <= in_fire;
        if (in_fire) begin
            if (s_axis_rx_tlast) begin
                beat_cnt <= 16'd0;
                i_hsel <= {{HDR_BEATS-1{1'b0}}, 1'b1};
            end else if (beat_cnt != 16'hFFFF) begin
                beat_cnt <= beat_cnt + 16'd1;
                i_hsel <= i_hsel << 1;
            end
        end
    end
end

reg [DATA_W-1:0] mem [0:FIFO_BEATS-1];
reg [AW:0] wr_ptr;       // next beat to write
reg [AW:0] fstart;       // first beat of the frame being written
reg [AW:0] free_ptr;     // beats before it may be overwritten
reg f_user;              // frame flags of the beats before this one
reg f_long;
reg f_ovf;

wire a_first = a_beat == 16'd0;
wire user_now = a_user || (f_user && !a_first);
wire long_now = (a_beat >= MAX_BEATS[15:0]) || (f_long && !a_first);
wire [AW:0] used = wr_ptr - free_ptr;
wire space = !used[AW];
wire ovf_prev = f_ovf && !a_first;
wire wr_en = a_valid && !long_now && !ovf_prev && space;
wire ovf_now = ovf_prev || (!long_now && !space);
wire rewind = user_now || long_now || ovf_now;
wire [AW:0] wr_next = wr_ptr + {{AW{1'b0}}, wr_en};
wire [AW:0] a_end = rewind ? fstart : wr_next;

always @(posedge clk) begin
    if (wr_en) begin
        mem[wr_ptr[AW-1:0]] <= a_data;
    end
end

always @(posedge clk) begin
    if (rst) begin
        wr_ptr <= {AW+1{1'b0}};
        fstart <= {AW+1{1'b0}};
        f_user <= 1'b0;
        f_long <= 1'b0;
        f_ovf <= 1'b0;
    end else if (a_valid) begin
        f_user <= user_now;
        f_long <= long_now;
        f_ovf <= ovf_now;
        wr_ptr <= a_last ? a_end : wr_next;
        if (a_last) begin
            fstart <= a_end;
        end
    end
end

// header bytes, merged with the beat in A
reg [8*HDR_BYTES-1:0] hdr;
reg [8*HDR_BYTES-1:0] hdr_m;
integer hi_;
always @(*) begin
    hdr_m = hdr;
    for (hi_ = 0; hi_ < HDR_BEATS; hi_ = hi_ + 1) begin
        if (a_hsel[hi_]) begin
            hdr_m[hi_*DATA_W +: DATA_W] = a_data;
        end
    end
end

always @(posedge clk) begin
    if (rst) begin
        hdr <= {8*HDR_BYTES{1'b0}};
    end else if (a_valid) begin
        hdr <= hdr_m;
    end
end

/*
 * The bounds of the byte masks (and the L4 header position) depend on the
 * VLAN tag, IHL and IPv4 total length, which may be in the beat in A itself
 * (at 512 bits, or the tag at 64).  They are worked out one cycle early, from
 * the beat at the input and the header as it will be in A (hdr_m of the next
 * cycle: hdr, the beat now in A merged if it is valid, the input beat
 * merged), and registered with the beat: A then only compares them.
 */
`define KV_PB(i) (i_hsel[(i)/KEEP_W] ? s_axis_rx_tdata[8*((i)%KEEP_W) +: 8] : \
                  (a_valid && a_hsel[(i)/KEEP_W]) ? a_data[8*((i)%KEEP_W) +: 8] : hdr[8*(i) +: 8])
wire p_vlan = {`KV_PB(12), `KV_PB(13)} == 16'h8100;
wire [7:0] p_vihl = p_vlan ? `KV_PB(18) : `KV_PB(14);
wire [3:0] p_ihl = p_vihl[3:0];
wire [15:0] p_w1 = p_vlan ? {`KV_PB(20), `KV_PB(21)} : {`KV_PB(16), `KV_PB(17)};
`undef KV_PB
wire [4:0] p_eoff = p_vlan ? 5'd18 : 5'd14;
wire [4:0] p_p5 = {4'd0, p_vlan} + {1'b0, p_ihl};

reg a_vlan;             // = x_vlan of the beat in A
reg [6:0] a_iphi;       // end of the IPv4 header: eoff + 4*IHL
reg [23:0] a_l4hi;      // end of the L4 segment: eoff + total length
reg [3:0] a_p;          // L4 header at 34 + 4*a_p

always @(posedge clk) begin
    a_vlan <= p_vlan;
    a_iphi <= {2'd0, p_eoff} + {1'b0, p_ihl, 2'b00};
    a_l4hi <= {19'd0, p_eoff} + {8'd0, p_w1};
    a_p <= (p_p5 >= 5'd5) ? p_p5[3:0] - 4'd5 : 4'd0;
end

`define KV_HB(i) hdr_m[8*(i) +: 8]
`define KV_IPB(k) (x_vlan ? hdr_m[8*(18+(k)) +: 8] : hdr_m[8*(14+(k)) +: 8])

wire [15:0] x_tpid = {`KV_HB(12), `KV_HB(13)};
wire x_vlan = a_vlan;
wire [47:0] x_dst_mac = {`KV_HB(0), `KV_HB(1), `KV_HB(2), `KV_HB(3), `KV_HB(4), `KV_HB(5)};
wire [47:0] x_src_mac = {`KV_HB(6), `KV_HB(7), `KV_HB(8), `KV_HB(9), `KV_HB(10), `KV_HB(11)};
wire [15:0] x_tci = {`KV_HB(14), `KV_HB(15)};
wire [15:0] x_etype = x_vlan ? {`KV_HB(16), `KV_HB(17)} : x_tpid;
wire [7:0] x_vihl = `KV_IPB(0);
wire [15:0] x_w1 = {`KV_IPB(2), `KV_IPB(3)};     // IPv4 total length / ARP ptype
wire [15:0] x_w3 = {`KV_IPB(6), `KV_IPB(7)};     // IPv4 flags+offset / ARP oper
wire [15:0] x_w0 = {`KV_IPB(0), `KV_IPB(1)};     // ARP htype
wire [7:0] x_b4 = `KV_IPB(4);                    // ARP hlen
wire [7:0] x_b5 = `KV_IPB(5);                    // ARP plen
wire [7:0] x_proto = `KV_IPB(9);
wire [31:0] x_src_ip = {`KV_IPB(12), `KV_IPB(13), `KV_IPB(14), `KV_IPB(15)};
wire [31:0] x_dst_ip = {`KV_IPB(16), `KV_IPB(17), `KV_IPB(18), `KV_IPB(19)};
wire [47:0] x_sha = {`KV_IPB(8), `KV_IPB(9), `KV_IPB(10), `KV_IPB(11), `KV_IPB(12), `KV_IPB(13)};
wire [31:0] x_spa = {`KV_IPB(14), `KV_IPB(15), `KV_IPB(16), `KV_IPB(17)};
wire [31:0] x_tpa = {`KV_IPB(24), `KV_IPB(25), `KV_IPB(26), `KV_IPB(27)};
// L4 header at 14 (+4) + 4*IHL = 34 + 4*p, picked from the registered header in stage B
wire [3:0] x_p = a_p;

`undef KV_HB
`undef KV_IPB

// byte masks of this beat: IPv4 header [eoff, eoff + 4*IHL), L4 segment [eoff + 4*IHL, eoff + total)
// (each bound depends only on bytes before it, all in hdr_m by now)
wire [4:0] x_eoff = x_vlan ? 5'd18 : 5'd14;
wire [6:0] x_iphi = a_iphi;
wire [23:0] x_l4hi = a_l4hi;
wire [KEEP_W-1:0] x_m_ip = therm({19'd0, x_eoff}, a_beat) & ~therm({17'd0, x_iphi}, a_beat) & a_keep;
wire [KEEP_W-1:0] x_m_l4 = therm({17'd0, x_iphi}, a_beat) & ~therm(x_l4hi, a_beat) & a_keep;

/*
 * Stage B: masks and masked word sums
 */
reg b_valid;
reg b_last;
reg [DATA_W-1:0] b_data;
reg [KEEP_W-1:0] b_keep;
reg [15:0] b_beat;
reg b_user;
reg b_long;
reg b_ovf;
reg [AW:0] b_start;
reg [AW:0] b_end;
reg [47:0] b_dst_mac;
reg [47:0] b_src_mac;
reg b_vlan;
reg [15:0] b_tci;
reg [15:0] b_etype;
reg [7:0] b_vihl;
reg [15:0] b_w0;
reg [15:0] b_w1;
reg [15:0] b_w3;
reg [7:0] b_b4;
reg [7:0] b_b5;
reg [7:0] b_proto;
reg [31:0] b_src_ip;
reg [31:0] b_dst_ip;
reg [47:0] b_sha;
reg [31:0] b_spa;
reg [31:0] b_tpa;
reg [3:0] b_p;
reg [KEEP_W-1:0] b_m_ip;
reg [KEEP_W-1:0] b_m_l4;

always @(posedge clk) begin
    b_data <= a_data;
    b_keep <= a_keep;
    b_beat <= a_beat;
    b_last <= a_last;
    b_user <= user_now;
    b_long <= long_now;
    b_ovf <= ovf_now;
    b_start <= fstart;
    b_end <= a_end;
    b_dst_mac <= x_dst_mac;
    b_src_mac <= x_src_mac;
    b_vlan <= x_vlan;
    b_tci <= x_tci;
    b_etype <= x_etype;
    b_vihl <= x_vihl;
    b_w0 <= x_w0;
    b_w1 <= x_w1;
    b_w3 <= x_w3;
    b_b4 <= x_b4;
    b_b5 <= x_b5;
    b_proto <= x_proto;
    b_src_ip <= x_src_ip;
    b_dst_ip <= x_dst_ip;
    b_sha <= x_sha;
    b_spa <= x_spa;
    b_tpa <= x_tpa;
    b_p <= x_p;
    b_m_ip <= x_m_ip;
    b_m_l4 <= x_m_l4;
    if (rst) begin
        b_valid <= 1'b0;
    end else begin
        b_valid <= a_valid;
    end
end

// hdr now holds the header as of this beat
wire [63:0] b_l4 = hdr[8*34 + {b_p, 5'b00000} +: 64];
wire [23:0] b_len = ({8'd0, b_beat} << LG_K) + {{23-LG_K{1'b0}}, popcount(b_keep)};

reg [NG*PW-1:0] b_ip_part;
reg [NG*PW-1:0] b_l4_part;
integer g_, w_;
always @(*) begin
    b_ip_part = {NG*PW{1'b0}};
    b_l4_part = {NG*PW{1'b0}};
    for (g_ = 0; g_ < NG; g_ = g_ + 1) begin
        for (w_ = g_*GW; w_ < (g_+1)*GW; w_ = w_ + 1) begin
            b_ip_part[g_*PW +: PW] = b_ip_part[g_*PW +: PW] + {{PW-16{1'b0}},
                b_data[16*w_ +: 8] & {8{b_m_ip[2*w_]}}, b_data[16*w_+8 +: 8] & {8{b_m_ip[2*w_+1]}}};
            b_l4_part[g_*PW +: PW] = b_l4_part[g_*PW +: PW] + {{PW-16{1'b0}},
                b_data[16*w_ +: 8] & {8{b_m_l4[2*w_]}}, b_data[16*w_+8 +: 8] & {8{b_m_l4[2*w_+1]}}};
        end
    end
end

// payload length and offset of the descriptor (header fields only), a stage
// ahead of the read count they give in C
wire [5:0] b_ihl4 = {b_vihl[3:0], 2'b00};
wire [15:0] b_plen = (b_etype == 16'h0806) ? 16'd0 : b_w1 - {10'd0, b_ihl4} - 16'd8;
wire [6:0] b_off = (b_vlan ? 7'd18 : 7'd14) + {1'b0, b_ihl4} + 7'd8;

/*
 * Stage C: accumulate; checks and descriptor at the last beat
 */
reg c_valid;
reg c_last;
reg c_first;
reg [NG*PW-1:0] c_ip_part;
reg [NG*PW-1:0] c_l4_part;
reg [23:0] c_len;
reg c_user;
reg c_long;
reg c_ovf;
reg [AW:0] c_start;
reg [AW:0] c_end;
reg [47:0] c_dst_mac;
reg [47:0] c_src_mac;
reg c_vlan;
reg [15:0] c_tci;
reg [15:0] c_etype;
reg [7:0] c_vihl;
reg [15:0] c_w0;
reg [15:0] c_w1;
reg [15:0] c_w3;
reg [7:0] c_b4;
reg [7:0] c_b5;
reg [7:0] c_proto;
reg [31:0] c_src_ip;
reg [31:0] c_dst_ip;
reg [47:0] c_sha;
reg [31:0] c_spa;
reg [31:0] c_tpa;
reg [63:0] c_l4;
reg [15:0] c_plen;
reg [6:0] c_off;

always @(posedge clk) begin
    c_plen <= b_plen;
    c_off <= b_off;
    c_last <= b_last;
    c_first <= b_beat == 16'd0;
    c_ip_part <= b_ip_part;
    c_l4_part <= b_l4_part;
    c_len <= b_len;
    c_user <= b_user;
    c_long <= b_long;
    c_ovf <= b_ovf;
    c_start <= b_start;
    c_end <= b_end;
    c_dst_mac <= b_dst_mac;
    c_src_mac <= b_src_mac;
    c_vlan <= b_vlan;
    c_tci <= b_tci;
    c_etype <= b_etype;
    c_vihl <= b_vihl;
    c_w0 <= b_w0;
    c_w1 <= b_w1;
    c_w3 <= b_w3;
    c_b4 <= b_b4;
    c_b5 <= b_b5;
    c_proto <= b_proto;
    c_src_ip <= b_src_ip;
    c_dst_ip <= b_dst_ip;
    c_sha <= b_sha;
    c_spa <= b_spa;
    c_tpa <= b_tpa;
    c_l4 <= b_l4;
    if (rst) begin
        c_valid <= 1'b0;
    end else begin
        c_valid <= b_valid;
    end
end

// header fields of the frame
wire [4:0] c_eoff = c_vlan ? 5'd18 : 5'd14;
wire [5:0] c_ihl4 = {c_vihl[3:0], 2'b00};
wire [15:0] c_l4len = c_w1 - {10'd0, c_ihl4};
wire [15:0] c_sport = {c_l4[7:0], c_l4[15:8]};
wire [15:0] c_dport = {c_l4[23:16], c_l4[31:24]};
wire [15:0] c_ulen = {c_l4[39:32], c_l4[47:40]};
wire [15:0] c_ucsum = {c_l4[55:48], c_l4[63:56]};
wire [15:0] c_icsum = {c_l4[23:16], c_l4[31:24]};
wire [31:0] c_idseq = {c_l4[39:32], c_l4[47:40], c_l4[55:48], c_l4[63:56]};

wire c_runt = c_len < 24'd60;
wire c_oversize = c_long || c_len > MAX_FRAME;
wire c_mac_ok = c_dst_mac == cfg_mac || c_dst_mac == 48'hFFFFFFFFFFFF;
wire c_is_ip = c_etype == 16'h0800;
wire c_is_arp = c_etype == 16'h0806;
wire c_ver_ok = c_vihl[7:4] == 4'd4;
wire c_ihl_ok = c_vihl[3:0] >= 4'd5;
wire c_hdr_in = c_len >= {19'd0, c_eoff} + {18'd0, c_ihl4};
wire c_tot_ok = c_w1 >= {10'd0, c_ihl4} && c_len >= {19'd0, c_eoff} + {8'd0, c_w1};
wire c_ipdst_ok = c_dst_ip == cfg_ip;
wire c_frag = c_w3[13] || c_w3[12:0] != 13'd0;
wire c_is_udp = c_proto == 8'd17;
wire c_is_icmp = c_proto == 8'd1;
wire c_udp_len_ok = c_ulen == c_l4len && c_ulen >= 16'd9;
wire c_port_ok = c_dport == cfg_udp_port;
wire c_icmp_len_ok = c_l4len >= 16'd8;
wire c_icmp_echo = c_l4[7:0] == 8'd8 && c_l4[15:8] == 8'd0;
wire c_arp_req = c_w0 == 16'd1 && c_w1 == 16'h0800 && c_b4 == 8'd6 && c_b5 == 8'd4 && c_w3 == 16'd1;
wire c_arp_tpa_ok = c_tpa == cfg_ip;

// outcome if the checksums are right, and which checksums decide
reg [4:0] c_code;
reg c_ipcs_rel;
reg c_l4cs_rel;
always @(*) begin
    c_ipcs_rel = 1'b0;
    c_l4cs_rel = 1'b0;
    if (c_user) begin
        c_code = O_MAC_ERR;
    end else if (c_oversize) begin
        c_code = O_OVERSIZE;
    end else if (c_runt) begin
        c_code = O_RUNT;
    end else if (!c_mac_ok) begin
        c_code = O_NOT_US;
    end else if (c_is_arp) begin
        c_code = !c_arp_req ? O_ARP_BAD : !c_arp_tpa_ok ? O_NOT_US : O_ARP;
    end else if (!c_is_ip || !c_ver_ok) begin
        c_code = O_ETYPE;
    end else if (!c_ihl_ok || !c_hdr_in) begin
        c_code = O_LEN;
    end else begin
        c_ipcs_rel = 1'b1;
        if (!c_tot_ok) begin
            c_code = O_LEN;
        end else if (!c_ipdst_ok) begin
            c_code = O_NOT_US;
        end else if (c_frag) begin
            c_code = O_FRAG;
        end else if (c_is_udp) begin
            if (!c_udp_len_ok) begin
                c_code = O_LEN;
            end else if (!c_port_ok) begin
                c_code = O_PORT;
            end else begin
                c_code = O_UDP;
                c_l4cs_rel = c_ucsum != 16'd0;
            end
        end else if (c_is_icmp) begin
            if (!c_icmp_len_ok) begin
                c_code = O_LEN;
            end else if (!c_icmp_echo) begin
                c_code = O_ICMP_BAD;
            end else begin
                c_code = O_ICMP;
                c_l4cs_rel = 1'b1;
            end
        end else begin
            c_code = O_PROTO;
        end
    end
end

// sums
reg [31:0] acc_ip;
reg [31:0] acc_l4;
reg [31:0] c_ip_sum;
reg [31:0] c_l4_sum;
integer cg_;
always @(*) begin
    c_ip_sum = c_first ? 32'd0 : acc_ip;
    c_l4_sum = c_first ? 32'd0 : acc_l4;
    for (cg_ = 0; cg_ < NG; cg_ = cg_ + 1) begin
        c_ip_sum = c_ip_sum + {{32-PW{1'b0}}, c_ip_part[cg_*PW +: PW]};
        c_l4_sum = c_l4_sum + {{32-PW{1'b0}}, c_l4_part[cg_*PW +: PW]};
    end
    if (c_last && c_is_udp) begin
        // pseudo-header: source and destination address, protocol, UDP length
        c_l4_sum = c_l4_sum + {16'd0, c_src_ip[31:16]} + {16'd0, c_src_ip[15:0]} + {16'd0, c_dst_ip[31:16]}
            + {16'd0, c_dst_ip[15:0]} + 32'd17 + {16'd0, c_ulen};
    end
end

always @(posedge clk) begin
    if (c_valid) begin
        acc_ip <= c_ip_sum;
        acc_l4 <= c_l4_sum;
    end
end

// descriptor: payload placement
wire [1:0] c_kind = c_is_arp ? 2'd1 : c_is_icmp ? 2'd2 : 2'd0;
wire [6:0] c_skip = c_off >> LG_K;
wire [23:0] c_pend = {17'd0, c_off} + {8'd0, c_plen} - 24'd1;
wire [23:0] c_reads_w = (c_plen == 16'd0) ? 24'd0 : (c_pend >> LG_K) - {17'd0, c_skip} + 24'd1;
wire [23:0] c_outs_w = ({8'd0, c_plen} + KEEP_M1[23:0]) >> LG_K;
wire [11:0] c_reads = c_reads_w[11:0];
// flush (the realigner's extra last beat): worked out in D from the registered counts
wire [LG_K:0] c_tail = (c_plen[LG_K-1:0] == {LG_K{1'b0}}) ? KEEP_32[LG_K:0] : {1'b0, c_plen[LG_K-1:0]};
wire [AW+6:0] c_rd_start_w = {7'd0, c_start[AW-1:0]} + {{AW{1'b0}}, c_skip};
wire [AW-1:0] c_rd_start = c_rd_start_w[AW-1:0];
// echo reply checksum from the request's (RFC 1624 eqn. 3: type 8 -> 0)
wire [16:0] c_ic_t = {1'b0, ~c_icsum} + 17'h0F7FF;
wire [15:0] c_ic_f = c_ic_t[15:0] + {15'd0, c_ic_t[16]};
wire [15:0] c_icmp_rcsum = ~c_ic_f;
// metadata: {kind, csum, aux, 0, vlan, tci, mac, ip, port, len}
wire [179:0] c_meta = {c_kind, c_icmp_rcsum, c_idseq, 1'b0, c_vlan, c_vlan ? c_tci : 16'd0,
    c_is_arp ? c_sha : c_src_mac, c_is_arp ? c_spa : c_src_ip, c_sport, c_plen};

/*
 * Stage D: checksums, outcome, descriptor push, counters
 */
localparam DW = 180 + (AW + 1) + AW + 12 + SW + 1 + (LG_K + 1);

reg d_valid;
reg [4:0] d_code;
reg d_ipcs_rel;
reg d_l4cs_rel;
reg d_udp;
reg d_ovf;
reg [AW:0] d_end;
reg [DW-1:0] d_desc;        // its flush bit is 0: the FIFO gets d_flush there
reg [11:0] d_outs;          // output beats of the payload

always @(posedge clk) begin
    d_code <= c_code;
    d_ipcs_rel <= c_ipcs_rel;
    d_l4cs_rel <= c_l4cs_rel;
    d_udp <= c_is_udp;
    d_ovf <= c_ovf;
    d_end <= c_end;
    d_desc <= {c_meta, c_end, c_rd_start, c_reads, c_off[SW+1:2], 1'b0, c_tail};
    d_outs <= c_outs_w[11:0];
    if (rst) begin
        d_valid <= 1'b0;
    end else begin
        d_valid <= c_valid && c_last;
    end
end

wire d_ip_ok = sum_ok(acc_ip);
wire d_l4_ok = sum_ok(acc_l4);
wire dq_in_ready;
reg [4:0] d_out;
always @(*) begin
    if (d_ipcs_rel && !d_ip_ok) begin
        d_out = O_IP_CSUM;
    end else if (d_l4cs_rel && !d_l4_ok) begin
        d_out = d_udp ? O_UDP_CSUM : O_ICMP_BAD;
    end else begin
        d_out = d_code;
    end
    if ((d_out == O_UDP || d_out == O_ARP || d_out == O_ICMP) && (d_ovf || !dq_in_ready)) begin
        d_out = O_FULL;
    end
end
wire d_commit = d_valid && (d_out == O_UDP || d_out == O_ARP || d_out == O_ICMP);
wire d_drop = d_valid && !d_commit;

always @(posedge clk) begin
    if (rst) begin
        stat_rx <= 18'd0;
    end else begin
        stat_rx <= d_valid ? (18'd1 | (18'd1 << d_out)) : 18'd0;
    end
end

// the read engine's decisions on a descriptor's read count, worked out as it is
// pushed so that none of them is on the path from the FIFO to free_ptr
wire [11:0] d_reads = d_desc[LG_K+SW+13 -: 12];
wire d_reads_0 = d_reads == 12'd0;
wire d_reads_le1 = d_reads <= 12'd1;
wire d_flush = !d_reads_le1 && d_outs == d_reads;

wire [DW+1:0] dq_data;
wire dq_valid;
wire dq_pop;
wire [$clog2(DESC_DEPTH):0] dq_count_unused;

kv_fifo #(
    .WIDTH(DW + 2),
    .DEPTH(DESC_DEPTH)
) desc_fifo (
    .clk(clk),
    .rst(rst),
    .s_data({d_reads_le1, d_reads_0, d_desc[DW-1:LG_K+2], d_flush, d_desc[LG_K:0]}),
    .s_valid(d_commit),
    .s_ready(dq_in_ready),
    .m_data(dq_data),
    .m_valid(dq_valid),
    .m_ready(dq_pop),
    .count(dq_count_unused)
);

/*
 * Frame FIFO space: free_ptr, one cycle after the decisions (E: a decision
 * is counted in the first cycle its descriptor can be read)
 */
reg e_commit;
reg e_drop;
reg [AW:0] e_end;
reg [15:0] outstanding;     // accepted frames whose beats are not all read
reg [AW:0] dec_end;         // end of the last frame decided
wire fin;                   // the read engine read a frame's last beat
wire [AW:0] fin_end;
// outstanding after this cycle's commit, then with fin: everything but the
// choice between the two is worked out from registers
wire [15:0] outst_inc = outstanding + {15'd0, e_commit};
wire [15:0] outst_dec = outst_inc - 16'd1;
wire outst_inc_1 = outst_inc == 16'd1;
wire [15:0] outst_next = fin ? outst_dec : outst_inc;

always @(posedge clk) begin
    e_end <= d_end;
    if (rst) begin
        e_commit <= 1'b0;
        e_drop <= 1'b0;
        outstanding <= 16'd0;
        dec_end <= {AW+1{1'b0}};
        free_ptr <= {AW+1{1'b0}};
    end else begin
        e_commit <= d_commit;
        e_drop <= d_drop;
        outstanding <= outst_next;
        if (e_commit || e_drop) begin
            dec_end <= e_end;
        end
        if (fin) begin
            if (outst_inc_1) begin
                free_ptr <= (e_commit || e_drop) ? e_end : dec_end;
            end else begin
                free_ptr <= fin_end;
            end
        end else if (e_drop && outstanding == 16'd0) begin
            free_ptr <= e_end;
        end
    end
end

/*
 * Read engine: descriptors -> tokens (one RAM read or one output each)
 */
wire dq_reads_le1 = dq_data[DW+1];
wire dq_reads_0 = dq_data[DW];
wire [179:0] dq_meta = dq_data[DW-1 -: 180];
wire [AW:0] dq_end = dq_data[DW-181 -: AW+1];
wire [AW-1:0] dq_start = dq_data[DW-182-AW -: AW];
wire [11:0] dq_reads = dq_data[LG_K+SW+13 -: 12];
wire dq_reads_1 = dq_reads_le1 && !dq_reads_0;
wire [SW-1:0] dq_sidx = dq_data[LG_K+SW+1 -: SW];
wire dq_flush = dq_data[LG_K+1];
wire [LG_K:0] dq_tail = dq_data[LG_K:0];
wire dq_dest = dq_meta[179:178] != 2'd0;

wire [$clog2(OF_DEPTH):0] of_count_unused;   // tracked by infl
wire mf_ready;
reg t1_valid;

reg act;
reg [11:0] ridx;
reg [11:0] cur_reads;
reg [AW-1:0] cur_addr;
reg [SW-1:0] cur_sidx;
reg cur_flush;
reg [LG_K:0] cur_tail;
reg cur_dest;
reg [AW:0] cur_end;
reg need_bub;

// the output FIFO has room for one more token: of_count + t1_valid < OF_DEPTH,
// kept in registers (infl, below) so that no FIFO pointer arithmetic is on the issue path
reg credit;
wire start_ok = !act && dq_valid && mf_ready && credit;

reg iss;
reg iss_read;
reg iss_empty;
reg iss_first;
reg iss_last;
reg iss_flushprev;
reg pop;
always @(*) begin
    iss = 1'b0;
    iss_read = 1'b0;
    iss_empty = 1'b0;
    iss_first = 1'b0;
    iss_last = 1'b0;
    iss_flushprev = 1'b0;
    pop = 1'b0;
    if (need_bub) begin
        if (credit) begin
            iss = 1'b1;
            iss_flushprev = 1'b1;
            if (start_ok && !dq_reads_le1) begin
                // the next frame's first read emits nothing: share its slot
                pop = 1'b1;
                iss_read = 1'b1;
                iss_first = 1'b1;
            end
        end
    end else if (act) begin
        if (credit) begin
            iss = 1'b1;
            iss_read = 1'b1;
            iss_last = ridx == cur_reads - 12'd1;
        end
    end else if (start_ok) begin
        pop = 1'b1;
        iss = 1'b1;
        if (dq_reads_0) begin
            iss_empty = 1'b1;
        end else begin
            iss_read = 1'b1;
            iss_first = 1'b1;
            iss_last = dq_reads_1;
        end
    end
end

assign dq_pop = pop;
assign fin = (act && !need_bub && iss && iss_last) || (pop && dq_reads_le1);
assign fin_end = pop ? dq_end : cur_end;
wire [AW-1:0] raddr = pop ? dq_start : cur_addr;

always @(posedge clk) begin
    if (rst) begin
        act <= 1'b0;
        need_bub <= 1'b0;
    end else begin
        if (iss_flushprev) begin
            need_bub <= 1'b0;
        end
        if (pop) begin
            cur_reads <= dq_reads;
            cur_addr <= dq_start + {{AW-1{1'b0}}, 1'b1};
            cur_sidx <= dq_sidx;
            cur_flush <= dq_flush;
            cur_tail <= dq_tail;
            cur_dest <= dq_dest;
            cur_end <= dq_end;
            ridx <= 12'd1;
            act <= !dq_reads_le1;
        end else if (act && iss) begin
            ridx <= ridx + 12'd1;
            cur_addr <= cur_addr + {{AW-1{1'b0}}, 1'b1};
            if (iss_last) begin
                act <= 1'b0;
                need_bub <= cur_flush;
            end
        end
    end
end

// token in flight (RAM read latency 1)
reg [DATA_W-1:0] ram_q;
reg t1_read;
reg t1_empty;
reg t1_first;
reg t1_last;
reg t1_flushprev;
reg t1_flush;
reg [SW-1:0] t1_sidx;
reg [LG_K:0] t1_tail;
reg t1_dest;

always @(posedge clk) begin
    if (iss_read) begin
        ram_q <= mem[raddr];
    end
end

always @(posedge clk) begin
    t1_read <= iss_read;
    t1_empty <= iss_empty;
    t1_first <= iss_first;
    t1_last <= iss_last;
    t1_flushprev <= iss_flushprev;
    t1_flush <= pop ? dq_flush : cur_flush;
    t1_sidx <= pop ? dq_sidx : cur_sidx;
    t1_tail <= pop ? dq_tail : cur_tail;
    t1_dest <= pop ? dq_dest : cur_dest;
    if (rst) begin
        t1_valid <= 1'b0;
    end else begin
        t1_valid <= iss;
    end
end

/*
 * Realigner: payload byte 0 to byte 0
 */
reg [DATA_W-1:0] prev;
reg [SW-1:0] p_sidx;
reg [LG_K:0] p_tail;
reg p_dest;

reg o_valid;
reg o_last;
reg o_dest;
reg [KEEP_W-1:0] o_keep;
reg [DATA_W-1:0] sh_lo;
reg [DATA_W-1:0] sh_hi;
reg [SW-1:0] sh_idx;
wire [2*DATA_W-1:0] sh_out = {sh_hi, sh_lo} >> (16 + 32 * sh_idx);

always @(*) begin
    o_valid = 1'b0;
    o_last = 1'b0;
    o_dest = t1_dest;
    o_keep = {KEEP_W{1'b1}};
    sh_lo = prev;
    sh_hi = ram_q;
    sh_idx = t1_sidx;
    if (t1_valid) begin
        if (t1_flushprev) begin
            o_valid = 1'b1;
            o_last = 1'b1;
            o_dest = p_dest;
            o_keep = low_lanes(p_tail);
            sh_hi = {DATA_W{1'b0}};
            sh_idx = p_sidx;
        end else if (t1_empty) begin
            o_valid = 1'b1;
            o_last = 1'b1;
            o_keep = {KEEP_W{1'b0}};
        end else if (t1_first && t1_last) begin
            o_valid = 1'b1;
            o_last = 1'b1;
            o_keep = low_lanes(t1_tail);
            sh_lo = ram_q;
            sh_hi = {DATA_W{1'b0}};
        end else if (!t1_first) begin
            o_valid = 1'b1;
            o_last = t1_last && !t1_flush;
            o_keep = o_last ? low_lanes(t1_tail) : {KEEP_W{1'b1}};
        end
    end
end

always @(posedge clk) begin
    if (t1_valid && t1_read) begin
        prev <= ram_q;
    end
    if (t1_valid && t1_read && !t1_first && t1_last && t1_flush) begin
        p_sidx <= t1_sidx;
        p_tail <= t1_tail;
        p_dest <= t1_dest;
    end
end

wire [DATA_W-1:0] o_data = sh_out[DATA_W-1:0] & byte_mask(o_keep);

/*
 * Output FIFO (beats) and metadata FIFO (frames), demultiplexed by kind
 */
wire [DATA_W+KEEP_W+1:0] of_data;
wire of_valid;
wire of_pop;

kv_fifo #(
    .WIDTH(DATA_W + KEEP_W + 2),
    .DEPTH(OF_DEPTH)
) out_fifo (
    .clk(clk),
    .rst(rst),
    .s_data({o_dest, o_last, o_keep, o_data}),
    .s_valid(o_valid),
    .s_ready(of_ready_unused),
    .m_data(of_data),
    .m_valid(of_valid),
    .m_ready(of_pop),
    .count(of_count_unused)
);

// beats in the output FIFO plus the token in flight (of_count + t1_valid)
localparam IW = $clog2(OF_DEPTH) + 1;
reg [IW-1:0] infl;
wire of_fire = of_valid && of_pop;
wire [IW-1:0] infl_next = infl + {{IW-1{1'b0}}, iss} - {{IW-1{1'b0}}, t1_valid && !o_valid}
                          - {{IW-1{1'b0}}, of_fire};

always @(posedge clk) begin
    if (rst) begin
        infl <= {IW{1'b0}};
        credit <= 1'b1;
    end else begin
        infl <= infl_next;
        credit <= infl_next < OF_DEPTH;
    end
end

wire [179:0] mf_data;
wire mf_valid_unused;   // always set when of_valid is (metadata goes in first)
wire of_ready_unused;    // always set when o_valid is (credits)
wire [$clog2(MF_DEPTH):0] mf_count_unused;
wire of_dest = of_data[DATA_W+KEEP_W+1];
wire of_last = of_data[DATA_W+KEEP_W];
assign of_pop = of_dest ? m_axis_ctl_tready : m_axis_pl_tready;

kv_fifo #(
    .WIDTH(180),
    .DEPTH(MF_DEPTH)
) meta_fifo (
    .clk(clk),
    .rst(rst),
    .s_data(dq_meta),
    .s_valid(pop),
    .s_ready(mf_ready),
    .m_data(mf_data),
    .m_valid(mf_valid_unused),
    .m_ready(of_valid && of_last && of_pop),
    .count(mf_count_unused)
);

assign m_axis_pl_tdata = of_data[DATA_W-1:0];
assign m_axis_pl_tkeep = of_data[DATA_W +: KEEP_W];
assign m_axis_pl_tlast = of_last;
assign m_axis_pl_tvalid = of_valid && !of_dest;
assign m_axis_pl_meta = mf_data[128:0];

assign m_axis_ctl_tdata = of_data[DATA_W-1:0];
assign m_axis_ctl_tkeep = of_data[DATA_W +: KEEP_W];
assign m_axis_ctl_tlast = of_last;
assign m_axis_ctl_tvalid = of_valid && of_dest;
assign m_axis_ctl_meta = mf_data;

wire unused = &{1'b0, c_rd_start_w[AW+6:AW], c_start[AW], c_reads_w[23:12], c_outs_w[23:12], sh_out[2*DATA_W-1:DATA_W], p_vihl[7:4], d_desc[LG_K+1]};

endmodule

`resetall
