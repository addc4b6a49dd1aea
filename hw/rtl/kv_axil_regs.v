/*

pynq-kv: AXI4-Lite slave front of a register block

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * The AXI4-Lite handshakes of a register block (kv_csr, kv_mc_csr), so each
 * block only decodes addresses.  One write and one read in progress at a
 * time, each channel on its own.
 *
 * Write: reg_wr_req is high while a write waits to be performed, with its
 * address, data, strobes and protection on reg_wr_*.  The register block
 * performs it in a cycle where it raises reg_wr_ack with reg_wr_req high,
 * giving the response code on reg_wr_resp (OKAY 2'b00, SLVERR 2'b10, or,
 * with FULL_RESP, whatever a downstream slave answered); bvalid rises in the
 * next cycle and holds until bready.  A block that answers at once ties
 * reg_wr_ack high; a block that forwards the access keeps it low until its
 * answer is there.
 *
 * REQ_REG = 0: the request comes straight from the bus, which holds it until
 * the handshake: reg_wr_req is high once awvalid and wvalid are both seen and
 * the previous response is accepted or being accepted, and awready/wready
 * pulse with bvalid, in the cycle after the ack (with the ack tied high: one
 * cycle after the request).
 * REQ_REG = 1: the request is first captured into registers (awready/wready
 * pulse in the cycle after awvalid and wvalid are seen, once the previous
 * response has been accepted), and reg_wr_req is high from that cycle until
 * the ack: the register block decodes registered addresses.
 *
 * Read: the same with reg_rd_req, reg_rd_ack, reg_rd_data and reg_rd_resp;
 * rvalid rises in the cycle after the ack, rdata holds the data given with
 * it; arready pulses as awready does.
 */
module kv_axil_regs #
(
    // AXI4-Lite address width in bits: 1 or more
    parameter ADDR_WIDTH = 12,
    // 0: requests straight from the bus; 1: requests captured into registers first
    parameter REQ_REG = 0,
    // 1: any 2-bit response code from the register side (a forwarded slave's EXOKAY or
    // DECERR included); 0: only OKAY or SLVERR, whose bit 0 is 0, so that bit is not stored
    parameter FULL_RESP = 1
)
(
    input  wire                     clk,
    input  wire                     rst,

    /*
     * AXI4-Lite slave
     */
    input  wire [ADDR_WIDTH-1:0]    s_axil_awaddr,
    input  wire [2:0]               s_axil_awprot,
    input  wire                     s_axil_awvalid,
    output wire                     s_axil_awready,
    input  wire [31:0]              s_axil_wdata,
    input  wire [3:0]               s_axil_wstrb,
    input  wire                     s_axil_wvalid,
    output wire                     s_axil_wready,
    output wire [1:0]               s_axil_bresp,
    output wire                     s_axil_bvalid,
    input  wire                     s_axil_bready,
    input  wire [ADDR_WIDTH-1:0]    s_axil_araddr,
    input  wire [2:0]               s_axil_arprot,
    input  wire                     s_axil_arvalid,
    output wire                     s_axil_arready,
    output wire [31:0]              s_axil_rdata,
    output wire [1:0]               s_axil_rresp,
    output wire                     s_axil_rvalid,
    input  wire                     s_axil_rready,

    /*
     * Register side: write
     */
    output wire [ADDR_WIDTH-1:0]    reg_wr_addr,
    output wire [2:0]               reg_wr_prot,
    output wire [31:0]              reg_wr_data,
    output wire [3:0]               reg_wr_strb,
    output wire                     reg_wr_req,
    input  wire                     reg_wr_ack,
    input  wire [1:0]               reg_wr_resp,

    /*
     * Register side: read
     */
    output wire [ADDR_WIDTH-1:0]    reg_rd_addr,
    output wire [2:0]               reg_rd_prot,
    output wire                     reg_rd_req,
    input  wire                     reg_rd_ack,
    input  wire [31:0]              reg_rd_data,
    input  wire [1:0]               reg_rd_resp
);

// check configuration
initial begin
    if (ADDR_WIDTH < 1) begin
        $error("Error: ADDR_WIDTH must be at least 1 (instance %m)");
        $finish;
    end
    if (REQ_REG != 0 && REQ_REG != 1) begin
        $error("Error: REQ_REG must be 0 or 1 (instance %m)");
        $finish;
    end
    if (FULL_RESP != 0 && FULL_RESP != 1) begin
        $error("Error: FULL_RESP must be 0 or 1 (instance %m)");
        $finish;
    end
end

reg s_axil_awready_reg;
reg [1:0] s_axil_bresp_reg;
reg s_axil_bvalid_reg;
reg s_axil_arready_reg;
reg [31:0] s_axil_rdata_reg;
reg [1:0] s_axil_rresp_reg;
reg s_axil_rvalid_reg;

assign s_axil_awready = s_axil_awready_reg;
assign s_axil_wready = s_axil_awready_reg;
assign s_axil_bresp = s_axil_bresp_reg;
assign s_axil_bvalid = s_axil_bvalid_reg;
assign s_axil_arready = s_axil_arready_reg;
assign s_axil_rdata = s_axil_rdata_reg;
assign s_axil_rresp = s_axil_rresp_reg;
assign s_axil_rvalid = s_axil_rvalid_reg;

wire wr_done = reg_wr_req && reg_wr_ack;
wire rd_done = reg_rd_req && reg_rd_ack;

// the response codes as stored: bit 0 only with FULL_RESP (else a constant 0, no flip-flop)
wire [1:0] wr_resp = {reg_wr_resp[1], FULL_RESP ? reg_wr_resp[0] : 1'b0};
wire [1:0] rd_resp = {reg_rd_resp[1], FULL_RESP ? reg_rd_resp[0] : 1'b0};

generate
    if (REQ_REG == 0) begin : bus_req
        assign reg_wr_addr = s_axil_awaddr;
        assign reg_wr_prot = s_axil_awprot;
        assign reg_wr_data = s_axil_wdata;
        assign reg_wr_strb = s_axil_wstrb;
        assign reg_wr_req = s_axil_awvalid && s_axil_wvalid && !s_axil_awready_reg
                            && (!s_axil_bvalid_reg || s_axil_bready);
        assign reg_rd_addr = s_axil_araddr;
        assign reg_rd_prot = s_axil_arprot;
        assign reg_rd_req = s_axil_arvalid && !s_axil_arready_reg && (!s_axil_rvalid_reg || s_axil_rready);

        always @(posedge clk) begin
            s_axil_awready_reg <= wr_done;
            s_axil_arready_reg <= rd_done;
            if (rst) begin
                s_axil_awready_reg <= 1'b0;
                s_axil_arready_reg <= 1'b0;
            end
        end
    end else begin : reg_req
        reg [ADDR_WIDTH-1:0] wr_addr_reg, rd_addr_reg;
        reg [2:0] wr_prot_reg, rd_prot_reg;
        reg [31:0] wr_data_reg;
        reg [3:0] wr_strb_reg;
        reg wr_pend_reg, rd_pend_reg;
        // take a request once the previous one has been answered and its response accepted
        wire wr_take = s_axil_awvalid && s_axil_wvalid && !wr_pend_reg && !s_axil_bvalid_reg;
        wire rd_take = s_axil_arvalid && !rd_pend_reg && !s_axil_rvalid_reg;

        assign reg_wr_addr = wr_addr_reg;
        assign reg_wr_prot = wr_prot_reg;
        assign reg_wr_data = wr_data_reg;
        assign reg_wr_strb = wr_strb_reg;
        assign reg_wr_req = wr_pend_reg;
        assign reg_rd_addr = rd_addr_reg;
        assign reg_rd_prot = rd_prot_reg;
        assign reg_rd_req = rd_pend_reg;

        always @(posedge clk) begin
            s_axil_awready_reg <= wr_take;
            s_axil_arready_reg <= rd_take;
            if (wr_take) begin
                wr_addr_reg <= s_axil_awaddr;
                wr_prot_reg <= s_axil_awprot;
                wr_data_reg <= s_axil_wdata;
                wr_strb_reg <= s_axil_wstrb;
                wr_pend_reg <= 1'b1;
            end
            if (wr_done) begin
                wr_pend_reg <= 1'b0;
            end
            if (rd_take) begin
                rd_addr_reg <= s_axil_araddr;
                rd_prot_reg <= s_axil_arprot;
                rd_pend_reg <= 1'b1;
            end
            if (rd_done) begin
                rd_pend_reg <= 1'b0;
            end
            if (rst) begin
                s_axil_awready_reg <= 1'b0;
                s_axil_arready_reg <= 1'b0;
                wr_pend_reg <= 1'b0;
                rd_pend_reg <= 1'b0;
            end
        end
    end
endgenerate

always @(posedge clk) begin
    if (s_axil_bready) begin
        s_axil_bvalid_reg <= 1'b0;
    end
    if (wr_done) begin
        s_axil_bvalid_reg <= 1'b1;
        s_axil_bresp_reg <= wr_resp;
    end
    if (s_axil_rready) begin
        s_axil_rvalid_reg <= 1'b0;
    end
    if (rd_done) begin
        s_axil_rvalid_reg <= 1'b1;
        s_axil_rdata_reg <= reg_rd_data;
        s_axil_rresp_reg <= rd_resp;
    end
    if (rst) begin
        s_axil_bresp_reg <= 2'b00;
        s_axil_bvalid_reg <= 1'b0;
        s_axil_rdata_reg <= 32'd0;
        s_axil_rresp_reg <= 2'b00;
        s_axil_rvalid_reg <= 1'b0;
    end
end

endmodule

`resetall
