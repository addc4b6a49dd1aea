/*

pynq-kv: Ethernet front-end, L2-L4 (receive + transmit + counters)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * The Ethernet/IPv4/UDP front-end of the memcached appliance
 * (docs/frontend_rtl.md, "Ethernet front-end: L2-L4")
 *
 * kv_eth_rx + kv_eth_tx + the frame counters.  MAC side: s_axis_rx (frames
 * in, never back-pressured) and m_axis_tx (frames out).  Core side:
 * m_axis_pl (UDP payloads to cfg_udp_port, with m_axis_pl_meta) and s_axis_rpl
 * (reply payloads, with s_axis_rpl_meta).  ARP requests for cfg_ip and ICMP
 * echo requests are answered inside.
 *
 * counters: NUM_COUNTERS 64-bit counters, counter c at counters[64*c +: 64],
 * in the order of docs/frontend_rtl.md (0 rx_frames, 1 rx_udp_payloads,
 * 2 arp_replies, 3 icmp_replies, 4..17 drop reasons, 18 tx_frames,
 * 19 tx_udp_replies, 20 tx_drop_oversize); rx_frames is the sum of 1..17.
 * counters_clear zeroes them all.
 */
module kv_eth_if #
(
    // Stream width in bits: 64 (10G/25G MAC) or 512 (100G CMAC)
    parameter DATA_W = 64,
    // tkeep width: must be DATA_W/8
    parameter KEEP_W = DATA_W/8,
    // Longest received frame in bytes (no FCS): 64 to 9022
    parameter MAX_FRAME = 1522,
    // Receive frame FIFO in bytes: a power of two holding two MAX_FRAME frames
    parameter RX_FIFO_BYTES = 16384,
    // Accepted frames that may wait in the receive FIFO: a power of two, 4 to 1024
    parameter RX_DESC_DEPTH = 64,
    // Reply buffer in bytes: a power of two holding two replies of TX_MAX_PAYLOAD
    parameter TX_BUF_BYTES = 8192,
    // Longest reply payload in bytes: 1 to 9000
    parameter TX_MAX_PAYLOAD = 1472,
    // Complete replies that may wait in the reply buffer: a power of two, 8 to 1024
    parameter TX_DESC_DEPTH = 32,
    // Number of counters on `counters`: must be 21
    parameter NUM_COUNTERS = 21
)
(
    input  wire                        clk,
    input  wire                        rst,

    /*
     * Configuration (CSR registers)
     */
    input  wire [47:0]                 cfg_mac,
    input  wire [31:0]                 cfg_ip,
    input  wire [15:0]                 cfg_udp_port,

    /*
     * MAC receive
     */
    input  wire [DATA_W-1:0]           s_axis_rx_tdata,
    input  wire [KEEP_W-1:0]           s_axis_rx_tkeep,
    input  wire                        s_axis_rx_tvalid,
    output wire                        s_axis_rx_tready,
    input  wire                        s_axis_rx_tlast,
    input  wire                        s_axis_rx_tuser,

    /*
     * MAC transmit
     */
    output wire [DATA_W-1:0]           m_axis_tx_tdata,
    output wire [KEEP_W-1:0]           m_axis_tx_tkeep,
    output wire                        m_axis_tx_tvalid,
    input  wire                        m_axis_tx_tready,
    output wire                        m_axis_tx_tlast,
    output wire                        m_axis_tx_tuser,

    /*
     * UDP payloads to the core
     */
    output wire [DATA_W-1:0]           m_axis_pl_tdata,
    output wire [KEEP_W-1:0]           m_axis_pl_tkeep,
    output wire                        m_axis_pl_tvalid,
    input  wire                        m_axis_pl_tready,
    output wire                        m_axis_pl_tlast,
    output wire [128:0]                m_axis_pl_meta,

    /*
     * Reply payloads from the core
     */
    input  wire [DATA_W-1:0]           s_axis_rpl_tdata,
    input  wire [KEEP_W-1:0]           s_axis_rpl_tkeep,
    input  wire                        s_axis_rpl_tvalid,
    output wire                        s_axis_rpl_tready,
    input  wire                        s_axis_rpl_tlast,
    input  wire [128:0]                s_axis_rpl_meta,

    /*
     * Counters
     */
    input  wire                        counters_clear,
    output wire [NUM_COUNTERS*64-1:0]  counters
);

// check configuration (the submodules check the rest)
initial begin
    if (NUM_COUNTERS != 21) begin
        $error("Error: NUM_COUNTERS must be 21 (instance %m)");
        $finish;
    end
end

wire [DATA_W-1:0] ctl_tdata;
wire [KEEP_W-1:0] ctl_tkeep;
wire ctl_tvalid;
wire ctl_tready;
wire ctl_tlast;
wire [179:0] ctl_meta;
wire [17:0] stat_rx;
wire [2:0] stat_tx;

kv_eth_rx #(
    .DATA_W(DATA_W),
    .KEEP_W(KEEP_W),
    .MAX_FRAME(MAX_FRAME),
    .FIFO_BYTES(RX_FIFO_BYTES),
    .DESC_DEPTH(RX_DESC_DEPTH)
) rx (
    .clk(clk),
    .rst(rst),
    .cfg_mac(cfg_mac),
    .cfg_ip(cfg_ip),
    .cfg_udp_port(cfg_udp_port),
    .s_axis_rx_tdata(s_axis_rx_tdata),
    .s_axis_rx_tkeep(s_axis_rx_tkeep),
    .s_axis_rx_tvalid(s_axis_rx_tvalid),
    .s_axis_rx_tready(s_axis_rx_tready),
    .s_axis_rx_tlast(s_axis_rx_tlast),
    .s_axis_rx_tuser(s_axis_rx_tuser),
    .m_axis_pl_tdata(m_axis_pl_tdata),
    .m_axis_pl_tkeep(m_axis_pl_tkeep),
    .m_axis_pl_tvalid(m_axis_pl_tvalid),
    .m_axis_pl_tready(m_axis_pl_tready),
    .m_axis_pl_tlast(m_axis_pl_tlast),
    .m_axis_pl_meta(m_axis_pl_meta),
    .m_axis_ctl_tdata(ctl_tdata),
    .m_axis_ctl_tkeep(ctl_tkeep),
    .m_axis_ctl_tvalid(ctl_tvalid),
    .m_axis_ctl_tready(ctl_tready),
    .m_axis_ctl_tlast(ctl_tlast),
    .m_axis_ctl_meta(ctl_meta),
    .stat_rx(stat_rx)
);

kv_eth_tx #(
    .DATA_W(DATA_W),
    .KEEP_W(KEEP_W),
    .BUF_BYTES(TX_BUF_BYTES),
    .MAX_PAYLOAD(TX_MAX_PAYLOAD),
    .DESC_DEPTH(TX_DESC_DEPTH)
) tx (
    .clk(clk),
    .rst(rst),
    .cfg_mac(cfg_mac),
    .cfg_ip(cfg_ip),
    .cfg_udp_port(cfg_udp_port),
    .s_axis_rpl_tdata(s_axis_rpl_tdata),
    .s_axis_rpl_tkeep(s_axis_rpl_tkeep),
    .s_axis_rpl_tvalid(s_axis_rpl_tvalid),
    .s_axis_rpl_tready(s_axis_rpl_tready),
    .s_axis_rpl_tlast(s_axis_rpl_tlast),
    .s_axis_rpl_meta(s_axis_rpl_meta),
    .s_axis_ctl_tdata(ctl_tdata),
    .s_axis_ctl_tkeep(ctl_tkeep),
    .s_axis_ctl_tvalid(ctl_tvalid),
    .s_axis_ctl_tready(ctl_tready),
    .s_axis_ctl_tlast(ctl_tlast),
    .s_axis_ctl_meta(ctl_meta),
    .m_axis_tx_tdata(m_axis_tx_tdata),
    .m_axis_tx_tkeep(m_axis_tx_tkeep),
    .m_axis_tx_tvalid(m_axis_tx_tvalid),
    .m_axis_tx_tready(m_axis_tx_tready),
    .m_axis_tx_tlast(m_axis_tx_tlast),
    .m_axis_tx_tuser(m_axis_tx_tuser),
    .stat_tx(stat_tx)
);

// counters
wire [NUM_COUNTERS-1:0] inc = {stat_tx, stat_rx};
reg [63:0] cnt [0:NUM_COUNTERS-1];

genvar c;
generate
    for (c = 0; c < NUM_COUNTERS; c = c + 1) begin : g_cnt
        always @(posedge clk) begin
            if (rst || counters_clear) begin
                cnt[c] <= 64'd0;
            end else if (inc[c]) begin
                cnt[c] <= cnt[c] + 64'd1;
            end
        end
        assign counters[64*c +: 64] = cnt[c];
    end
endgenerate

endmodule

`resetall
