/*

pynq-kv: Ethernet front-end, transmit path (L2-L4)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Ethernet/IPv4/UDP transmit path with ARP and ICMP echo replies
 * (docs/frontend_rtl.md, "Ethernet front-end: L2-L4")
 *
 * Core replies (s_axis_rpl, payload byte 0 in byte 0, metadata on the first
 * beat) are written into the reply buffer while their one's-complement sum
 * is accumulated: the UDP checksum covers the whole payload, so a reply is
 * framed only once it is complete (store-and-forward).  A reply longer than
 * MAX_PAYLOAD is dropped (stat_tx[2]).  ARP and ICMP echo work comes from
 * kv_eth_rx on s_axis_ctl (echo data, or one empty beat) and streams through.
 *
 *   writer   reply beats -> buffer RAM; word sums; descriptor at the last beat
 *   reader   descriptors -> buffer reads -> payload FIFO (a job FIFO holds
 *            each reply's metadata and sum for the arbiter meanwhile)
 *   arbiter  round robin between the reply jobs and the ctl stream's head
 *   J1       IPv4 header and UDP checksum sums
 *   J2       checksums folded; the 42/46-byte header; frame geometry
 *   framer   header beats, then the payload shifted in behind the header,
 *            zero padding to 60 bytes; one beat per cycle, no gaps inside
 *            a frame as long as the payload source keeps up (the buffer
 *            reader and kv_eth_rx's read engine do)
 *
 * Replies carry source MAC/IP cfg_mac/cfg_ip, UDP source port cfg_udp_port,
 * IPv4 identification from a counter, TTL 64, DF, and an 802.1Q tag when the
 * job's vlan_valid is set.  A computed UDP checksum of 0 is sent as 0xFFFF.
 *
 * stat_tx pulses: bit 0 a frame sent (last beat taken by the MAC), bit 1 it
 * was a UDP reply, bit 2 a reply dropped for length.
 */
module kv_eth_tx #
(
    // Stream width in bits: 64 (10G/25G MAC) or 512 (100G CMAC)
    parameter DATA_W = 64,
    // tkeep width: must be DATA_W/8
    parameter KEEP_W = DATA_W/8,
    // Reply buffer in bytes: a power of two holding two replies of MAX_PAYLOAD
    parameter BUF_BYTES = 8192,
    // Longest reply payload in bytes: 1 to 9000 (1472 fills a 1500-byte MTU)
    parameter MAX_PAYLOAD = 1472,
    // Complete replies that may wait in the buffer: a power of two from 8 to 1024
    parameter DESC_DEPTH = 32
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
     * Reply payloads from the memcached core
     */
    input  wire [DATA_W-1:0]     s_axis_rpl_tdata,
    input  wire [KEEP_W-1:0]     s_axis_rpl_tkeep,
    input  wire                  s_axis_rpl_tvalid,
    output wire                  s_axis_rpl_tready,
    input  wire                  s_axis_rpl_tlast,
    input  wire [128:0]          s_axis_rpl_meta,

    /*
     * ARP / ICMP echo work from kv_eth_rx
     */
    input  wire [DATA_W-1:0]     s_axis_ctl_tdata,
    input  wire [KEEP_W-1:0]     s_axis_ctl_tkeep,
    input  wire                  s_axis_ctl_tvalid,
    output wire                  s_axis_ctl_tready,
    input  wire                  s_axis_ctl_tlast,
    input  wire [179:0]          s_axis_ctl_meta,

    /*
     * Frames to the MAC (no FCS)
     */
    output wire [DATA_W-1:0]     m_axis_tx_tdata,
    output wire [KEEP_W-1:0]     m_axis_tx_tkeep,
    output wire                  m_axis_tx_tvalid,
    input  wire                  m_axis_tx_tready,
    output wire                  m_axis_tx_tlast,
    output wire                  m_axis_tx_tuser,

    /*
     * Counter pulses: bit 0 frame sent, bit 1 UDP reply sent, bit 2 reply dropped
     */
    output reg  [2:0]            stat_tx
);

localparam LG_K = $clog2(KEEP_W);
localparam BUF_BEATS = BUF_BYTES / KEEP_W;
localparam BAW = $clog2(BUF_BEATS);
localparam [31:0] MAX_PBEATS = (MAX_PAYLOAD + KEEP_W - 1) / KEEP_W;
localparam REM = MAX_PAYLOAD - (MAX_PBEATS - 1) * KEEP_W;    // bytes allowed in the last beat: 1..KEEP_W
localparam REM_LANE = REM < KEEP_W ? REM : 0;
localparam [31:0] KEEP_M1 = KEEP_W - 1;
localparam [31:0] KEEP_32 = KEEP_W;
localparam WORDS = KEEP_W / 2;
localparam GW = WORDS < 8 ? WORDS : 8;
localparam NG = WORDS / GW;
localparam PW = 20;
localparam RD_DEPTH = 4;         // payload FIFO beats (reader -> framer)
// header: 42 bytes (46 with a tag); header-only beats, shift of the payload behind it
localparam [31:0] HB = 42 / KEEP_W;
localparam [31:0] H0 = 42 % KEEP_W;
localparam [31:0] H1 = 46 % KEEP_W;
localparam HB_PAD = (46 + KEEP_W - 1) / KEEP_W;

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
    if (MAX_PAYLOAD < 1 || MAX_PAYLOAD > 9000) begin
        $error("Error: MAX_PAYLOAD must be 1 to 9000 (instance %m)");
        $finish;
    end
    if ((BUF_BYTES & (BUF_BYTES - 1)) != 0 || BUF_BEATS < 2 * MAX_PBEATS || BUF_BEATS < 4) begin
        $error("Error: BUF_BYTES must be a power of two holding two MAX_PAYLOAD replies (instance %m)");
        $finish;
    end
    if (DESC_DEPTH < 8 || DESC_DEPTH > 1024 || (DESC_DEPTH & (DESC_DEPTH - 1)) != 0) begin
        $error("Error: DESC_DEPTH must be a power of two from 8 to 1024 (instance %m)");
        $finish;
    end
end

function [KEEP_W-1:0] low_lanes(input [LG_K:0] n);
    integer i;
    begin
        for (i = 0; i < KEEP_W; i = i + 1) begin
            low_lanes[i] = i < n;
        end
    end
endfunction

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

function [15:0] fold(input [31:0] x);
    reg [16:0] s;
    begin
        s = {1'b0, x[15:0]} + {1'b0, x[31:16]};
        fold = s[15:0] + {15'd0, s[16]};
    end
endfunction

/*
 * Writer: reply beats into the buffer
 */
reg [DATA_W-1:0] mem [0:BUF_BEATS-1];
reg [BAW:0] wr_ptr;
reg [BAW:0] fstart;
reg [BAW:0] free_ptr;
reg [15:0] rb;
reg [128:0] fmeta;

localparam DDW = BAW + 12 + (BAW + 1);
wire [$clog2(DESC_DEPTH):0] dq_count;
reg w1_valid;
reg w1_last;
reg w2_valid;
reg w2_last;

// rb == 0 and rb >= MAX_PBEATS, kept as registers beside rb (below)
reg r_first;
reg r_disc;
wire [BAW:0] used = wr_ptr - free_ptr;
wire space = !used[BAW];
wire [$clog2(DESC_DEPTH):0] jf_count;
wire [$clog2(DESC_DEPTH):0] q_count = (dq_count > jf_count) ? dq_count : jf_count;
// room for one more reply's descriptor, registered: counts the replies in W1/W2 and one that may
// complete in this cycle, so it holds in the next
reg droom;
always @(posedge clk) begin
    droom <= ({{31-$clog2(DESC_DEPTH){1'b0}}, q_count} + {31'd0, w1_valid && w1_last}
        + {31'd0, w2_valid && w2_last}) < DESC_DEPTH - 2;
end
assign s_axis_rpl_tready = !rst && (r_disc || (space && droom));
wire r_fire = s_axis_rpl_tvalid && s_axis_rpl_tready;
wire r_wr = r_fire && !r_disc;
// longer than MAX_PAYLOAD: beyond the last beat it may have, or that beat fuller than REM bytes
// (tkeep is contiguous: more than REM bytes means lane REM is set)
wire r_drop = r_disc || (REM < KEEP_W && rb == MAX_PBEATS[15:0] - 16'd1 && s_axis_rpl_tkeep[REM_LANE]);
wire [DATA_W-1:0] r_data = s_axis_rpl_tdata & byte_mask(s_axis_rpl_tkeep);
wire [BAW:0] wr_inc = wr_ptr + {{BAW{1'b0}}, 1'b1};
wire [BAW:0] r_next = r_wr ? wr_inc : wr_ptr;

always @(posedge clk) begin
    if (r_wr) begin
        mem[wr_ptr[BAW-1:0]] <= r_data;
    end
end

always @(posedge clk) begin
    if (rst) begin
        wr_ptr <= {BAW+1{1'b0}};
        fstart <= {BAW+1{1'b0}};
        rb <= 16'd0;
        r_first <= 1'b1;
        r_disc <= 1'b0;
    end else if (r_fire) begin
        // rb saturates at 0xFFFF, so it is never 0 again before tlast
        r_first <= s_axis_rpl_tlast;
        r_disc <= !s_axis_rpl_tlast && rb >= MAX_PBEATS[15:0] - 16'd1;
        if (s_axis_rpl_tlast) begin
            rb <= 16'd0;
            wr_ptr <= r_drop ? fstart : r_next;
            fstart <= r_drop ? fstart : r_next;
        end else begin
            if (rb != 16'hFFFF) begin
                rb <= rb + 16'd1;
            end
            wr_ptr <= r_next;
        end
    end
end

always @(posedge clk) begin
    if (r_fire && r_first) begin
        fmeta <= s_axis_rpl_meta;
    end
end

// W1: beat registered; W2: group sums; then the running sum and the descriptor
reg [DATA_W-1:0] w1_data;
reg w1_first;
reg w1_drop;
reg [128:0] w1_meta;
reg [BAW:0] w1_start;
reg [BAW:0] w1_end;
reg [11:0] w1_nbeats;
reg [15:0] w1_rb;
reg [KEEP_W-1:0] w1_keep;
wire [23:0] w1_plen = ({8'd0, w1_rb} << LG_K) + {{23-LG_K{1'b0}}, popcount(w1_keep)};

always @(posedge clk) begin
    w1_data <= r_data;
    w1_last <= s_axis_rpl_tlast;
    w1_first <= r_first;
    w1_drop <= r_drop;
    w1_meta <= r_first ? s_axis_rpl_meta : fmeta;
    w1_start <= fstart;
    w1_end <= r_next;
    w1_nbeats <= rb[11:0] + 12'd1;
    w1_rb <= rb;
    w1_keep <= s_axis_rpl_tkeep;
    if (rst) begin
        w1_valid <= 1'b0;
    end else begin
        w1_valid <= r_fire;
    end
end

reg [NG*PW-1:0] w1_part;
integer g_, w_;
always @(*) begin
    w1_part = {NG*PW{1'b0}};
    for (g_ = 0; g_ < NG; g_ = g_ + 1) begin
        for (w_ = g_*GW; w_ < (g_+1)*GW; w_ = w_ + 1) begin
            w1_part[g_*PW +: PW] = w1_part[g_*PW +: PW] + {{PW-16{1'b0}}, w1_data[16*w_ +: 8], w1_data[16*w_+8 +: 8]};
        end
    end
end

reg [NG*PW-1:0] w2_part;
reg w2_first;
reg w2_drop;
reg [128:0] w2_meta;
reg [BAW:0] w2_start;
reg [BAW:0] w2_end;
reg [11:0] w2_nbeats;
reg [15:0] w2_plen;

always @(posedge clk) begin
    w2_part <= w1_part;
    w2_last <= w1_last;
    w2_first <= w1_first;
    w2_drop <= w1_drop;
    w2_meta <= w1_meta;
    w2_start <= w1_start;
    w2_end <= w1_end;
    w2_nbeats <= w1_nbeats;
    w2_plen <= w1_plen[15:0];
    if (rst) begin
        w2_valid <= 1'b0;
    end else begin
        w2_valid <= w1_valid;
    end
end

reg [31:0] acc;
reg [31:0] acc_next;
integer cg_;
always @(*) begin
    acc_next = w2_first ? 32'd0 : acc;
    for (cg_ = 0; cg_ < NG; cg_ = cg_ + 1) begin
        acc_next = acc_next + {{32-PW{1'b0}}, w2_part[cg_*PW +: PW]};
    end
end

always @(posedge clk) begin
    if (w2_valid) begin
        acc <= acc_next;
    end
end

wire dq_push = w2_valid && w2_last && !w2_drop;
wire [DDW-1:0] dq_in = {w2_start[BAW-1:0], w2_nbeats, w2_end};
wire [160:0] jf_in = {w2_meta[128:16], w2_plen, acc_next};

always @(posedge clk) begin
    if (rst) begin
        stat_tx[2] <= 1'b0;
    end else begin
        stat_tx[2] <= w2_valid && w2_last && w2_drop;
    end
end

wire [DDW-1:0] dq_data;
wire dq_valid;
wire dq_pop;
wire dq_ready_unused;       // always set when dq_push is (droom)

kv_fifo #(
    .WIDTH(DDW),
    .DEPTH(DESC_DEPTH)
) desc_fifo (
    .clk(clk),
    .rst(rst),
    .s_data(dq_in),
    .s_valid(dq_push),
    .s_ready(dq_ready_unused),
    .m_data(dq_data),
    .m_valid(dq_valid),
    .m_ready(dq_pop),
    .count(dq_count)
);

/*
 * Reader: buffer beats -> payload FIFO, descriptors -> job FIFO
 */
wire [BAW:0] dq_end = dq_data[BAW:0];
wire [11:0] dq_nbeats = dq_data[BAW+12 -: 12];
wire [BAW-1:0] dq_start = dq_data[2*BAW+12 -: BAW];

wire [$clog2(RD_DEPTH):0] rd_count;
reg t1_valid;
reg act;
reg [11:0] ridx;
reg [11:0] cur_n;
reg [BAW-1:0] cur_addr;
reg [BAW:0] cur_end;

wire credit = ({{31-$clog2(RD_DEPTH){1'b0}}, rd_count} + {31'd0, t1_valid}) < RD_DEPTH;
wire pop = !act && dq_valid && credit;
wire iss = pop || (act && credit);
wire iss_last = act ? (ridx == cur_n - 12'd1) : (dq_nbeats == 12'd1);
wire [BAW-1:0] raddr = act ? cur_addr : dq_start;
assign dq_pop = pop;

always @(posedge clk) begin
    if (rst) begin
        act <= 1'b0;
        free_ptr <= {BAW+1{1'b0}};
    end else begin
        if (pop) begin
            cur_n <= dq_nbeats;
            cur_addr <= dq_start + {{BAW-1{1'b0}}, 1'b1};
            cur_end <= dq_end;
            ridx <= 12'd1;
            act <= dq_nbeats != 12'd1;
        end else if (act && credit) begin
            ridx <= ridx + 12'd1;
            cur_addr <= cur_addr + {{BAW-1{1'b0}}, 1'b1};
            if (iss_last) begin
                act <= 1'b0;
            end
        end
        if (iss && iss_last) begin
            free_ptr <= act ? cur_end : dq_end;
        end
    end
end

reg [DATA_W-1:0] ram_q;
reg t1_last;
always @(posedge clk) begin
    if (iss) begin
        ram_q <= mem[raddr];
    end
    t1_last <= iss_last;
    if (rst) begin
        t1_valid <= 1'b0;
    end else begin
        t1_valid <= iss;
    end
end

wire [DATA_W:0] rd_data;
wire rd_valid;
wire rd_pop;
wire rd_ready_unused;       // always set when t1_valid is (credits)

kv_fifo #(
    .WIDTH(DATA_W + 1),
    .DEPTH(RD_DEPTH)
) pay_fifo (
    .clk(clk),
    .rst(rst),
    .s_data({t1_last, ram_q}),
    .s_valid(t1_valid),
    .s_ready(rd_ready_unused),
    .m_data(rd_data),
    .m_valid(rd_valid),
    .m_ready(rd_pop),
    .count(rd_count)
);

// reply jobs {meta without length, payload length, payload sum}, one per descriptor, taken by
// the arbiter as soon as the reply is complete (ahead of the reader)
wire [160:0] jf_data;
wire jf_valid;
wire jf_pop;
wire jf_ready_unused;       // always set when dq_push is (droom)

kv_fifo #(
    .WIDTH(161),
    .DEPTH(DESC_DEPTH)
) job_fifo (
    .clk(clk),
    .rst(rst),
    .s_data(jf_in),
    .s_valid(dq_push),
    .s_ready(jf_ready_unused),
    .m_data(jf_data),
    .m_valid(jf_valid),
    .m_ready(jf_pop),
    .count(jf_count)
);

/*
 * Arbiter and job pipeline
 */
reg ctl_taken;      // the ctl stream's head frame is already a job
reg rr;             // 1: the ctl stream goes first on a tie
reg [15:0] ip_id;

reg j1_valid;
reg j1_src;         // 0 reply buffer, 1 ctl stream
reg [1:0] j1_kind;  // 0 UDP, 1 ARP, 2 ICMP echo
reg j1_vlan;
reg [15:0] j1_tci;
reg [47:0] j1_mac;
reg [31:0] j1_ip;
reg [15:0] j1_port;
reg [31:0] j1_aux;
reg [15:0] j1_icsum;
reg [15:0] j1_plen;
reg [15:0] j1_id;
reg [31:0] j1_ipsum;
reg [31:0] j1_udpsum;

reg j2_valid;
wire j2_take;
wire j1_move = j1_valid && (!j2_valid || j2_take);
wire j1_free = !j1_valid || j1_move;

wire rpl_av = jf_valid;
wire ctl_av = s_axis_ctl_tvalid && !ctl_taken;
wire take = j1_free && (rpl_av || ctl_av);
wire take_ctl = ctl_av && (!rpl_av || rr);
assign jf_pop = take && !take_ctl;

// the selected job
wire [1:0] s_kind = take_ctl ? s_axis_ctl_meta[179:178] : 2'd0;
wire [128:0] s_meta = take_ctl ? s_axis_ctl_meta[128:0] : {jf_data[160:48], jf_data[47:32]};
wire [31:0] s_sum = jf_data[31:0];
wire [15:0] s_plen = s_meta[15:0];
wire [31:0] s_ip = s_meta[63:32];
wire [15:0] s_port = s_meta[31:16];
// the configuration's share of both sums, registered (cfg_* change between frames)
reg [31:0] cfg_ipsum;       // version/IHL, flags (DF), TTL, source address
reg [31:0] cfg_udpsum;      // source address, protocol, source port
always @(posedge clk) begin
    cfg_ipsum <= 32'h4500 + 32'h4000 + 32'h4000 + {16'd0, cfg_ip[31:16]} + {16'd0, cfg_ip[15:0]};
    cfg_udpsum <= {16'd0, cfg_ip[31:16]} + {16'd0, cfg_ip[15:0]} + 32'd17 + {16'd0, cfg_udp_port};
end
// the header sums of both candidates (reply job, ctl frame) as balanced adder trees, the
// choice between them last: the arbiter's decision is not in front of the adders
function [31:0] ip_sum(input [31:0] base, input [15:0] plen, input [7:0] proto, input [31:0] ip);
    begin
        ip_sum = (base + ({16'd0, plen + 16'd28} + {24'd0, proto})) + ({16'd0, ip[31:16]} + {16'd0, ip[15:0]});
    end
endfunction
function [31:0] udp_sum(input [31:0] base, input [31:0] sum, input [15:0] plen, input [31:0] ip,
                        input [15:0] port);
    begin
        udp_sum = ((base + {15'd0, plen + 16'd8, 1'b0}) + (sum + {16'd0, port}))
            + ({16'd0, ip[31:16]} + {16'd0, ip[15:0]});
    end
endfunction
wire [31:0] ipsum_base = cfg_ipsum + {16'd0, ip_id};
wire [63:0] jf_meta = {jf_data[95:48], jf_data[47:32]};     // s_meta[63:0] of a reply job
wire [1:0] ctl_kind = s_axis_ctl_meta[179:178];
wire [31:0] s_ipsum = take_ctl
    ? ip_sum(ipsum_base, s_axis_ctl_meta[15:0], (ctl_kind == 2'd2) ? 8'd1 : 8'd17, s_axis_ctl_meta[63:32])
    : ip_sum(ipsum_base, jf_meta[15:0], 8'd17, jf_meta[63:32]);
wire [31:0] s_udpsum = take_ctl
    ? udp_sum(cfg_udpsum, s_sum, s_axis_ctl_meta[15:0], s_axis_ctl_meta[63:32], s_axis_ctl_meta[31:16])
    : udp_sum(cfg_udpsum, s_sum, jf_meta[15:0], jf_meta[63:32], jf_meta[31:16]);

always @(posedge clk) begin
    if (take) begin
        j1_src <= take_ctl;
        j1_kind <= s_kind;
        j1_vlan <= s_meta[128];
        j1_tci <= s_meta[127:112];
        j1_mac <= s_meta[111:64];
        j1_ip <= s_ip;
        j1_port <= s_port;
        j1_aux <= s_axis_ctl_meta[161:130];
        j1_icsum <= s_axis_ctl_meta[177:162];
        j1_plen <= s_plen;
        j1_id <= ip_id;
        j1_ipsum <= s_ipsum;
        j1_udpsum <= s_udpsum;
    end
    if (rst) begin
        j1_valid <= 1'b0;
        ctl_taken <= 1'b0;
        rr <= 1'b0;
        ip_id <= 16'd0;
    end else begin
        if (take) begin
            j1_valid <= 1'b1;
            rr <= !take_ctl;
            if (s_kind != 2'd1) begin
                ip_id <= ip_id + 16'd1;
            end
        end else if (j1_move) begin
            j1_valid <= 1'b0;
        end
        if (take && take_ctl) begin
            ctl_taken <= 1'b1;
        end else if (s_axis_ctl_tvalid && s_axis_ctl_tready && s_axis_ctl_tlast) begin
            ctl_taken <= 1'b0;
        end
    end
end

// J2: the header, lane order (byte i at [8i +: 8]), zero above its length
wire [15:0] j1_ipcs = ~fold(j1_ipsum);
wire [15:0] j1_udpcs_raw = ~fold(j1_udpsum);
wire [15:0] j1_udpcs = (j1_udpcs_raw == 16'd0) ? 16'hFFFF : j1_udpcs_raw;
wire [15:0] j1_total = j1_plen + 16'd28;
wire [15:0] j1_ulen = j1_plen + 16'd8;
wire [7:0] j1_proto = (j1_kind == 2'd2) ? 8'd1 : 8'd17;
wire [63:0] j1_l4 = (j1_kind == 2'd2) ? {16'h0000, j1_icsum, j1_aux} : {cfg_udp_port, j1_port, j1_ulen, j1_udpcs};
wire [223:0] j1_body = (j1_kind == 2'd1)
    ? {16'h0001, 16'h0800, 8'h06, 8'h04, 16'h0002, cfg_mac, cfg_ip, j1_mac, j1_ip}
    : {8'h45, 8'h00, j1_total, j1_id, 16'h4000, 8'h40, j1_proto, j1_ipcs, cfg_ip, j1_ip, j1_l4};
wire [15:0] j1_etype = (j1_kind == 2'd1) ? 16'h0806 : 16'h0800;
wire [367:0] j1_hdr_be = j1_vlan ? {j1_mac, cfg_mac, 16'h8100, j1_tci, j1_etype, j1_body}
                                 : {j1_mac, cfg_mac, j1_etype, j1_body, 32'd0};
reg [HB_PAD*DATA_W-1:0] j1_hdr;
integer hb_;
always @(*) begin
    j1_hdr = {HB_PAD*DATA_W{1'b0}};
    for (hb_ = 0; hb_ < 46; hb_ = hb_ + 1) begin
        j1_hdr[8*hb_ +: 8] = j1_hdr_be[367 - 8*hb_ -: 8];
    end
end
wire [16:0] j1_hp = {1'b0, j1_plen} + (j1_vlan ? 17'd46 : 17'd42);
wire [16:0] j1_t = (j1_hp < 17'd60) ? 17'd60 : j1_hp;
wire [16:0] j1_m = (j1_t + KEEP_M1[16:0]) >> LG_K;
wire [16:0] j1_q = (j1_plen == 16'd0) ? 17'd1 : ({1'b0, j1_plen} + KEEP_M1[16:0]) >> LG_K;
wire [LG_K:0] j1_tail = (j1_t[LG_K-1:0] == {LG_K{1'b0}}) ? KEEP_32[LG_K:0] : {1'b0, j1_t[LG_K-1:0]};

reg [HB_PAD*DATA_W-1:0] j2_hdr;
reg j2_src;
reg [1:0] j2_kind;
reg j2_vlan;
reg [15:0] j2_m;
reg [15:0] j2_q;
reg [LG_K:0] j2_tail;

always @(posedge clk) begin
    if (j1_move) begin
        j2_hdr <= j1_hdr;
        j2_src <= j1_src;
        j2_kind <= j1_kind;
        j2_vlan <= j1_vlan;
        j2_m <= j1_m[15:0];
        j2_q <= j1_q[15:0];
        j2_tail <= j1_tail;
    end
    if (rst) begin
        j2_valid <= 1'b0;
    end else if (j1_move) begin
        j2_valid <= 1'b1;
    end else if (j2_take) begin
        j2_valid <= 1'b0;
    end
end

/*
 * Framer
 */
reg f_act;
reg [HB_PAD*DATA_W-1:0] f_hdr;
reg f_src;
reg [1:0] f_kind;
reg f_vlan;
reg [15:0] f_m;          // output beat index
reg [15:0] f_mlast;      // index of the last output beat
reg [15:0] f_q;          // payload beats taken
reg [15:0] f_qn;         // payload beats of the frame
reg [LG_K:0] f_tail;
reg [DATA_W-1:0] prev;

reg o_valid;
reg [DATA_W-1:0] o_data;
reg [KEEP_W-1:0] o_keep;
reg o_last;
reg o_udp;

// f_m >= HB, f_q < f_qn and f_m == f_mlast, kept as registers beside f_m and f_q (each
// next value compares registers), so that the ready of the ctl stream and of the payload
// FIFO is a few gates from registers
reg in_pay_r;
reg q_lt_r;
reg f_end_r;

wire can_out = !o_valid || m_axis_tx_tready;
wire in_pay = (HB == 32'd0) || in_pay_r;
wire need_pay = in_pay && q_lt_r;
wire src_valid = f_src ? s_axis_ctl_tvalid : rd_valid;
wire [DATA_W-1:0] src_data = f_src ? s_axis_ctl_tdata : rd_data[DATA_W-1:0];
wire step = f_act && can_out && (!need_pay || src_valid);
wire f_end = f_end_r;
assign j2_take = j2_valid && (!f_act || (step && f_end));
assign rd_pop = step && need_pay && !f_src;
// ready whether or not a beat is offered (a transfer is still step && need_pay && f_src):
// the ctl stream's valid does not come back into its ready
assign s_axis_ctl_tready = f_act && can_out && need_pay && f_src;

wire [DATA_W-1:0] cur = need_pay ? src_data : {DATA_W{1'b0}};
wire [DATA_W-1:0] pay_h0 = (cur << (8 * H0)) | (prev >> (8 * (KEEP_32 - H0)));
wire [DATA_W-1:0] pay_h1 = (cur << (8 * H1)) | (prev >> (8 * (KEEP_32 - H1)));
reg [DATA_W-1:0] hdr_part;
integer hp_;
always @(*) begin
    hdr_part = {DATA_W{1'b0}};
    for (hp_ = 0; hp_ < HB_PAD; hp_ = hp_ + 1) begin
        if (f_m == hp_[15:0]) begin
            hdr_part = f_hdr[hp_*DATA_W +: DATA_W];
        end
    end
end
wire [DATA_W-1:0] beat = hdr_part | (in_pay ? (f_vlan ? pay_h1 : pay_h0) : {DATA_W{1'b0}});

always @(posedge clk) begin
    if (j2_take) begin
        f_hdr <= j2_hdr;
        f_src <= j2_src;
        f_kind <= j2_kind;
        f_vlan <= j2_vlan;
        f_mlast <= j2_m - 16'd1;
        f_qn <= j2_q;
        f_tail <= j2_tail;
    end
    if (step && !f_end) begin
        f_m <= f_m + 16'd1;
        in_pay_r <= {1'b0, f_m} + 17'd2 > {1'b0, HB[15:0]};  // f_m + 1 >= HB, not constant at HB 0
        f_end_r <= f_m + 16'd1 == f_mlast;
    end else if (j2_take) begin
        f_m <= 16'd0;
        in_pay_r <= HB == 32'd0;
        f_end_r <= j2_m == 16'd1;
    end
    if (j2_take) begin
        f_q <= 16'd0;
        q_lt_r <= j2_q != 16'd0;
        prev <= {DATA_W{1'b0}};
    end else if (step && in_pay) begin
        f_q <= f_q + {15'd0, need_pay};
        if (need_pay) begin
            q_lt_r <= f_q + 16'd1 < f_qn;
        end
        prev <= cur;
    end
    if (step) begin
        o_data <= beat;
        o_keep <= f_end ? low_lanes(f_tail) : {KEEP_W{1'b1}};
        o_last <= f_end;
        o_udp <= f_kind == 2'd0;
    end
    if (rst) begin
        f_act <= 1'b0;
        o_valid <= 1'b0;
        stat_tx[1:0] <= 2'b00;
    end else begin
        if (j2_take) begin
            f_act <= 1'b1;
        end else if (step && f_end) begin
            f_act <= 1'b0;
        end
        if (step) begin
            o_valid <= 1'b1;
        end else if (m_axis_tx_tready) begin
            o_valid <= 1'b0;
        end
        stat_tx[0] <= o_valid && m_axis_tx_tready && o_last;
        stat_tx[1] <= o_valid && m_axis_tx_tready && o_last && o_udp;
    end
end

assign m_axis_tx_tdata = o_data;
assign m_axis_tx_tkeep = o_keep;
assign m_axis_tx_tvalid = o_valid;
assign m_axis_tx_tlast = o_last;
assign m_axis_tx_tuser = 1'b0;

wire unused = &{1'b0, rd_data[DATA_W], s_axis_ctl_tkeep, s_axis_ctl_meta[129], j1_m[16],
    j1_q[16], w2_meta[15:0], w2_start[BAW], w1_plen[23:16]};

endmodule

`resetall
