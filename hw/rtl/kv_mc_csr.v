/*

pynq-kv: front-end registers and counters, in front of the engine CSR

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * The AXI4-Lite slave of kv_top.  Addresses 0x900-0xAFF (the front-end
 * block of docs/registers.md: FE_* registers and the FE_COUNTER array) are
 * answered here; every other address is passed on unchanged to kv_csr
 * through m_axil_* and its response returned.
 *
 * Registers (offsets, fields and counter ids from the generated kv_regs.vh):
 *   FE_CTRL         write 1 to bit 0: counters_clear pulse (reads 0)
 *   FE_MAC_LO/HI    cfg_mac, reset CFG_MAC (network order, first byte in 47:40)
 *   FE_IP           cfg_ip, reset CFG_IP
 *   FE_UDP_PORT     cfg_udp_port, reset CFG_UDP_PORT
 *   FE_DATA_W       DATA_W (read only)
 *   FE_NUM_COUNTERS NUM_COUNTERS (read only)
 *   FE_COUNTER      counter c: word 2c bits 31:0 (reading it latches bits
 *                   63:32 into c's shadow), word 2c+1 the shadow
 * Byte strobes are honoured.  Unmapped front-end addresses, words beyond
 * the counters and writes to read-only registers answer SLVERR (reads 0).
 *
 * AXI4-Lite (the handshakes are kv_axil_regs', with registered requests):
 * one write and one read at a time each; a transaction is taken once both
 * awvalid and wvalid (or arvalid) are seen, and its response is given once
 * it has been done here or by kv_csr (the captured address and data are
 * forwarded on m_axil_*).  Address bits above 11 and bits 1:0 are ignored,
 * as in kv_csr.
 */
module kv_mc_csr #
(
    // Key and value widths: only for the stream offsets of kv_regs.vh
    parameter KEY_W = 288,
    parameter VALUE_W = 32,
    // AXI4-Lite address width: >= 12
    parameter ADDR_WIDTH = 12,
    // Front-end stream width, reported in FE_DATA_W
    parameter DATA_W = 512,
    // Number of 64-bit counters on fe_counters: KV_FE_NUM_COUNTERS (checked)
    parameter NUM_COUNTERS = 32,
    // Reset values of the address registers
    parameter [47:0] CFG_MAC = 48'h020000000001,
    parameter [31:0] CFG_IP = 32'h0A000001,
    parameter [15:0] CFG_UDP_PORT = 16'd11211
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * AXI4-Lite slave (the whole register map)
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
     * AXI4-Lite master to kv_csr (everything outside the front-end block)
     */
    output wire [ADDR_WIDTH-1:0]     m_axil_awaddr,
    output wire [2:0]                m_axil_awprot,
    output wire                      m_axil_awvalid,
    input  wire                      m_axil_awready,
    output wire [31:0]               m_axil_wdata,
    output wire [3:0]                m_axil_wstrb,
    output wire                      m_axil_wvalid,
    input  wire                      m_axil_wready,
    input  wire [1:0]                m_axil_bresp,
    input  wire                      m_axil_bvalid,
    output wire                      m_axil_bready,
    output wire [ADDR_WIDTH-1:0]     m_axil_araddr,
    output wire [2:0]                m_axil_arprot,
    output wire                      m_axil_arvalid,
    input  wire                      m_axil_arready,
    input  wire [31:0]               m_axil_rdata,
    input  wire [1:0]                m_axil_rresp,
    input  wire                      m_axil_rvalid,
    output wire                      m_axil_rready,

    /*
     * Front-end configuration and counters
     */
    output wire [47:0]               cfg_mac,
    output wire [31:0]               cfg_ip,
    output wire [15:0]               cfg_udp_port,
    output wire                      counters_clear,
    input  wire [NUM_COUNTERS*64-1:0] fe_counters
);

`include "kv_regs.vh"

localparam CNT_IB = $clog2(KV_REG_FE_COUNTER_SIZE);
localparam [1:0] RESP_OKAY = 2'b00;
localparam [1:0] RESP_SLVERR = 2'b10;

// check configuration
initial begin
    if (ADDR_WIDTH < KV_ADDR_BITS) begin
        $error("Error: ADDR_WIDTH must be at least KV_ADDR_BITS (instance %m)");
        $finish;
    end
    if (NUM_COUNTERS != KV_FE_NUM_COUNTERS) begin
        $error("Error: NUM_COUNTERS must be KV_FE_NUM_COUNTERS of kv_regs.vh (instance %m)");
        $finish;
    end
    if (KV_REG_FE_CTRL[11:8] != 4'h9 || KV_REG_FE_NUM_COUNTERS[11:8] != 4'h9 ||
            KV_REG_FE_COUNTER[11:8] != 4'hA || KV_REG_FE_COUNTER_SIZE > 64) begin
        $error("Error: the front-end registers must lie in 0x900-0xAFF (instance %m)");
        $finish;
    end
end

function [31:0] merge(input [31:0] old, input [31:0] data, input [3:0] strb);
    integer b;
    begin
        for (b = 0; b < 4; b = b + 1) begin
            merge[8*b +: 8] = strb[b] ? data[8*b +: 8] : old[8*b +: 8];
        end
    end
endfunction

function is_fe(input [3:0] page);
    begin
        is_fe = page == 4'h9 || page == 4'hA;
    end
endfunction

/*
 * AXI4-Lite handshakes: a captured front-end access is answered at once, any
 * other once kv_csr has answered it
 */
wire [ADDR_WIDTH-1:0] reg_wr_addr, reg_rd_addr;
wire [2:0] reg_wr_prot, reg_rd_prot;
wire [31:0] reg_wr_data;
wire [3:0] reg_wr_strb;
wire reg_wr_req, reg_wr_ack, reg_rd_req, reg_rd_ack;
wire [1:0] reg_wr_resp, reg_rd_resp;
wire [31:0] reg_rd_data;

kv_axil_regs #(
    .ADDR_WIDTH(ADDR_WIDTH),
    .REQ_REG(1)
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
    .reg_wr_req(reg_wr_req),
    .reg_wr_ack(reg_wr_ack),
    .reg_wr_resp(reg_wr_resp),
    .reg_rd_addr(reg_rd_addr),
    .reg_rd_prot(reg_rd_prot),
    .reg_rd_req(reg_rd_req),
    .reg_rd_ack(reg_rd_ack),
    .reg_rd_data(reg_rd_data),
    .reg_rd_resp(reg_rd_resp)
);

/*
 * front-end registers
 */
reg [47:0] mac_reg;
reg [31:0] ip_reg;
reg [15:0] port_reg;
reg clear_reg;
reg [NUM_COUNTERS*32-1:0] shadow_reg;

assign cfg_mac = mac_reg;
assign cfg_ip = ip_reg;
assign cfg_udp_port = port_reg;
assign counters_clear = clear_reg;

/*
 * write channel: a front-end write is done at once, any other is forwarded
 * to kv_csr
 */
localparam [1:0]
    F_IDLE = 2'd0,
    F_FWD = 2'd1,
    F_WAIT = 2'd2;

reg [1:0] w_state_reg;
reg m_awvalid_reg, m_wvalid_reg;

wire wr_fe = is_fe(reg_wr_addr[11:8]);
assign m_axil_awaddr = reg_wr_addr;
assign m_axil_awprot = reg_wr_prot;
assign m_axil_awvalid = m_awvalid_reg;
assign m_axil_wdata = reg_wr_data;
assign m_axil_wstrb = reg_wr_strb;
assign m_axil_wvalid = m_wvalid_reg;
assign m_axil_bready = w_state_reg == F_WAIT;

wire [11:0] wa = {reg_wr_addr[11:2], 2'b00};
wire wr_mac_lo = wa == KV_REG_FE_MAC_LO;
wire wr_mac_hi = wa == KV_REG_FE_MAC_HI;
wire wr_ip = wa == KV_REG_FE_IP;
wire wr_port = wa == KV_REG_FE_UDP_PORT;
wire wr_ctrl = wa == KV_REG_FE_CTRL;
wire wr_ok = wr_mac_lo || wr_mac_hi || wr_ip || wr_port || wr_ctrl;
wire [31:0] ctrl_bits = merge(32'd0, reg_wr_data, reg_wr_strb);
wire [31:0] mac_hi_new = merge({16'd0, mac_reg[47:32]}, reg_wr_data, reg_wr_strb);
wire [31:0] port_new = merge({16'd0, port_reg}, reg_wr_data, reg_wr_strb);

assign reg_wr_ack = wr_fe || (w_state_reg == F_WAIT && m_axil_bvalid);
assign reg_wr_resp = !wr_fe ? m_axil_bresp : wr_ok ? RESP_OKAY : RESP_SLVERR;
wire wr_fe_en = reg_wr_req && wr_fe;

always @(posedge clk) begin
    clear_reg <= 1'b0;
    if (wr_fe_en) begin
        if (wr_mac_lo) begin
            mac_reg[31:0] <= merge(mac_reg[31:0], reg_wr_data, reg_wr_strb);
        end
        if (wr_mac_hi) begin
            mac_reg[47:32] <= mac_hi_new[15:0];
        end
        if (wr_ip) begin
            ip_reg <= merge(ip_reg, reg_wr_data, reg_wr_strb);
        end
        if (wr_port) begin
            port_reg <= port_new[15:0];
        end
        if (wr_ctrl) begin
            clear_reg <= ctrl_bits[0];
        end
    end
    case (w_state_reg)
        F_IDLE: begin
            if (reg_wr_req && !wr_fe) begin
                m_awvalid_reg <= 1'b1;
                m_wvalid_reg <= 1'b1;
                w_state_reg <= F_FWD;
            end
        end
        F_FWD: begin
            if (m_axil_awready) begin
                m_awvalid_reg <= 1'b0;
            end
            if (m_axil_wready) begin
                m_wvalid_reg <= 1'b0;
            end
            if ((m_axil_awready || !m_awvalid_reg) && (m_axil_wready || !m_wvalid_reg)) begin
                w_state_reg <= F_WAIT;
            end
        end
        default: begin // F_WAIT: the response goes back through kv_axil_regs
            if (m_axil_bvalid) begin
                w_state_reg <= F_IDLE;
            end
        end
    endcase
    if (rst) begin
        w_state_reg <= F_IDLE;
        m_awvalid_reg <= 1'b0;
        m_wvalid_reg <= 1'b0;
        clear_reg <= 1'b0;
        mac_reg <= CFG_MAC;
        ip_reg <= CFG_IP;
        port_reg <= CFG_UDP_PORT;
    end
end

/*
 * read channel: the same split
 */
reg [1:0] r_state_reg;
reg m_arvalid_reg;

wire rd_fe = is_fe(reg_rd_addr[11:8]);
assign m_axil_araddr = reg_rd_addr;
assign m_axil_arprot = reg_rd_prot;
assign m_axil_arvalid = m_arvalid_reg;
assign m_axil_rready = r_state_reg == F_WAIT;

wire [11:0] ra = {reg_rd_addr[11:2], 2'b00};
wire [CNT_IB-1:0] cidx = ra[2 +: CNT_IB];
wire in_cnt = (ra >> (CNT_IB + 2)) == (KV_REG_FE_COUNTER >> (CNT_IB + 2));
wire [31:0] cidx32 = {{(32-CNT_IB){1'b0}}, cidx};
wire cnt_ok = in_cnt && cidx32 < 2 * NUM_COUNTERS;
wire [31:0] cnum32 = cidx32 >> 1;

reg [31:0] cnt_lo, cnt_hi, cnt_shadow;
integer k;
always @* begin
    cnt_lo = 32'd0;
    cnt_hi = 32'd0;
    cnt_shadow = 32'd0;
    for (k = 0; k < NUM_COUNTERS; k = k + 1) begin
        cnt_lo = cnt_lo | (fe_counters[64*k +: 32] & {32{cnum32 == k}});
        cnt_hi = cnt_hi | (fe_counters[64*k + 32 +: 32] & {32{cnum32 == k}});
        cnt_shadow = cnt_shadow | (shadow_reg[32*k +: 32] & {32{cnum32 == k}});
    end
end

reg [31:0] rd_data;
reg rd_ok;
always @* begin
    rd_data = 32'd0;
    rd_ok = 1'b1;
    case (ra)
        KV_REG_FE_CTRL:         rd_data = 32'd0;
        KV_REG_FE_MAC_LO:       rd_data = mac_reg[31:0];
        KV_REG_FE_MAC_HI:       rd_data = {16'd0, mac_reg[47:32]};
        KV_REG_FE_IP:           rd_data = ip_reg;
        KV_REG_FE_UDP_PORT:     rd_data = {16'd0, port_reg};
        KV_REG_FE_DATA_W:       rd_data = DATA_W;
        KV_REG_FE_NUM_COUNTERS: rd_data = NUM_COUNTERS;
        default: begin
            rd_ok = cnt_ok;
            rd_data = !cnt_ok ? 32'd0 : (cidx[0] ? cnt_shadow : cnt_lo);
        end
    endcase
end

assign reg_rd_ack = rd_fe || (r_state_reg == F_WAIT && m_axil_rvalid);
assign reg_rd_data = rd_fe ? rd_data : m_axil_rdata;
assign reg_rd_resp = !rd_fe ? m_axil_rresp : rd_ok ? RESP_OKAY : RESP_SLVERR;

integer j;
always @(posedge clk) begin
    if (reg_rd_req && rd_fe && cnt_ok && !cidx[0]) begin
        for (j = 0; j < NUM_COUNTERS; j = j + 1) begin
            if (cnum32 == j) begin
                shadow_reg[32*j +: 32] <= cnt_hi;
            end
        end
    end
    case (r_state_reg)
        F_IDLE: begin
            if (reg_rd_req && !rd_fe) begin
                m_arvalid_reg <= 1'b1;
                r_state_reg <= F_FWD;
            end
        end
        F_FWD: begin
            if (m_axil_arready) begin
                m_arvalid_reg <= 1'b0;
                r_state_reg <= F_WAIT;
            end
        end
        default: begin // F_WAIT
            if (m_axil_rvalid) begin
                r_state_reg <= F_IDLE;
            end
        end
    endcase
    if (rst) begin
        r_state_reg <= F_IDLE;
        m_arvalid_reg <= 1'b0;
        shadow_reg <= {NUM_COUNTERS*32{1'b0}};
    end
end

// the upper bits of the 16-bit registers' merged words; CTRL bits other than 0
wire unused = &{1'b0, ctrl_bits[31:1], mac_hi_new[31:16], port_new[31:16]};

endmodule

`resetall
